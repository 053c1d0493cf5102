"""Overlapping task activations in a browser, desktop (1280x800) and phone (390x844).

Each race is made deterministic with the ``sessions.list`` hold fault point (the forced session
load of an activation waits at the server), server state polled through the test API
(``hits`` / ``waiting`` of the fault point, the task's summary) and Playwright's waiting
``expect``; never a fixed sleep:

- S42: a second click on the same pending task aborts the first click's held load (the server
  sees the held read cancelled) and the aborted continuation changes nothing: the winner's
  session stays selected.
- S12: the older of two overlapping loads of one task cannot replace the newer snapshot or
  revive the obsolete pending owner: ownership changes while the first load is held, the second
  load applies the newer truth, and nothing of the first one ever shows.
- S41: the task being activated is deleted while its load is held; when the load settles, the
  selected task and session stay exactly as they were, and the deleted task's row is gone.
- S14: from an open session, a pending task whose owner vanishes during its held load falls
  back to its task-only route, and the outgoing session's layout never shows under it.

"Nothing flips" is checked over the tab's whole history, not only at the end: every redirect
the server sends over the Reflex websocket is recorded, and so is every navigation of the page
(``history.pushState``/``replaceState``/``popstate``, by an init script). A continuation that
sent the tab to an obsolete owner or to the task-only fallback fails the test even when a newer
redirect overtook it before the router committed it. ``aria-busy`` on the task list tells when
the newest activation of the tab has settled.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, WebSocket, expect

from tests.e2e.api import Api, PendingTask
from tests.e2e.viewports import DESKTOP, PHONE

pytestmark = pytest.mark.e2e

SURFACES = ["desktop", "phone"]
LOAD_FAULT = "sessions.list"

#: Records the path of every navigation of the tab (survives full page loads).
_RECORD_NAVIGATION = """
(() => {
  const key = '__kandev_paths';
  const record = () => {
    const paths = JSON.parse(sessionStorage.getItem(key) || '[]');
    paths.push(location.pathname);
    sessionStorage.setItem(key, JSON.stringify(paths));
  };
  for (const name of ['pushState', 'replaceState']) {
    const original = history[name];
    history[name] = function (...args) {
      const result = original.apply(this, args);
      record();
      return result;
    };
  }
  window.addEventListener('popstate', record);
  record();
})();
"""


@pytest.fixture
def held_loads(api: Api) -> Iterator[None]:
    """Whatever a test does, no hold outlives it."""
    yield
    api.client.delete(f"/_test/failpoints/{LOAD_FAULT}")


def unique(text: str) -> str:
    return f"{text} {uuid.uuid4().hex[:6]}"


# -- the page ---------------------------------------------------------------------------------


def redirect_paths(payload: str | bytes) -> list[str]:
    """The paths of the ``_redirect`` events in one Reflex websocket frame (socket.io text:
    a packet-type prefix, then JSON)."""
    text = payload.decode(errors="replace") if isinstance(payload, bytes) else payload
    if "_redirect" not in text or "[" not in text:
        return []
    try:
        data = json.loads(text[text.index("[") :])
    except ValueError:
        return ["<unparsed redirect frame>"]
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("name") == "_redirect" and isinstance(node.get("payload"), dict):
                found.append(str(node["payload"].get("path")))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    return found


@dataclass
class Surface:
    """One browser tab on a desktop or phone viewport, and where its task rows are."""

    kind: str
    page: Page
    app_url: str
    #: Every redirect the server sent this tab, in order.
    redirects: list[str] = field(default_factory=list)

    def record_redirects(self, socket: WebSocket) -> None:
        socket.on("framereceived", lambda payload: self.redirects.extend(redirect_paths(payload)))

    @property
    def phone(self) -> bool:
        return self.kind == "phone"

    def sheet(self) -> Locator:
        return self.page.get_by_role("dialog", name="Tasks")

    def open_list(self) -> None:
        """Phone: open the bottom-nav "Tasks" sheet (tasks are picked there)."""
        if self.phone and self.sheet().count() == 0:
            self.page.get_by_role("button", name="Tasks", exact=True).click()
            expect(self.sheet()).to_be_visible()

    def row(self, task_id: str) -> Locator:
        prefix = "sheet-task-row" if self.phone else "task-row"
        return self.page.locator(f"#{prefix}-{task_id}")

    def task_list(self) -> Locator:
        """The sidebar's task list: in the page on every route and viewport (hidden on a
        phone's session route), so its ``aria-busy`` is readable even with the sheet closed."""
        return self.page.locator("#sidebar [data-testid=task-groups]")

    def pick(self, task_id: str) -> None:
        self.open_list()
        self.row(task_id).click()

    def paths(self) -> list[str]:
        return list(self.page.evaluate("JSON.parse(sessionStorage.getItem('__kandev_paths'))"))

    def mark(self) -> tuple[int, int]:
        """Where the tab's history and redirect record stand now."""
        return len(self.paths()), len(self.redirects)

    def since(self, mark: tuple[int, int]) -> tuple[list[str], list[str]]:
        """Navigations and server redirects after ``mark`` (reading the page also delivers
        any websocket frame Playwright has not dispatched yet)."""
        paths = self.paths()[mark[0] :]
        return paths, self.redirects[mark[1] :]

    def overlay(self) -> Locator:
        return self.page.get_by_role("dialog", name="Agent question")


@pytest.fixture(params=SURFACES)
def surface(request: pytest.FixtureRequest, browser: Browser, app_url: str) -> Iterator[Surface]:
    context = browser.new_context(**(PHONE if request.param == "phone" else DESKTOP))
    context.add_init_script(_RECORD_NAVIGATION)
    try:
        page = context.new_page()
        surface = Surface(request.param, page, app_url)
        page.on("websocket", surface.record_redirects)
        page.goto(app_url)
        yield surface
    finally:
        context.close()


# -- the server -------------------------------------------------------------------------------


def hold_first_load(api: Api) -> None:
    """Hold the next forced session load at the server; later loads pass."""
    api._ok(api.client.put(f"/_test/failpoints/{LOAD_FAULT}", json={"action": "hold", "count": 1}))


def fault(api: Api) -> dict[str, Any]:
    return api.get("/_test/failpoints")["failpoints"].get(LOAD_FAULT) or {}


def wait_held(api: Api, waiting: int, what: str) -> None:
    api.wait_for(lambda: fault(api).get("waiting") == waiting, what)


def summary(api: Api, task_id: str) -> dict[str, Any]:
    return api.task(task_id).get("status_summary") or {}


def session_path(task_id: str, session_id: str) -> str:
    return f"/tasks/{task_id}/sessions/{session_id}"


def assert_only_visited(surface: Surface, mark: tuple[int, int], path: str | None) -> None:
    """Every redirect and navigation after ``mark`` went to ``path`` (and there was at least
    one of each), or there was none at all (``path=None``)."""
    visited, redirected = surface.since(mark)
    if path is None:
        assert (visited, redirected) == ([], []), "the tab navigated"
        return
    assert redirected, "the winning activation sent no redirect"
    assert set(redirected) == {path}, f"the tab was also sent to {sorted(set(redirected) - {path})}"
    assert visited, "the winning activation did not navigate"
    assert set(visited) == {path}, f"the tab also visited {sorted(set(visited) - {path})}"


def assert_shows_session(surface: Surface, task_id: str, session_id: str) -> None:
    expect(surface.page).to_have_url(f"{surface.app_url}{session_path(task_id, session_id)}")
    expect(surface.page.locator(f"#session-tab-{session_id}")).to_have_attribute(
        "aria-selected", "true"
    )


# -- S42 ------------------------------------------------------------------------------------


@pytest.mark.scenario("S42")
@pytest.mark.usefixtures("held_loads")
def test_a_newer_load_aborts_the_older_one_and_the_winner_stays_selected(
    surface: Surface, api: Api
) -> None:
    task = api.pending_task(unique(f"S42 {surface.kind}"), "Ship the hotfix today?")
    surface.open_list()
    expect(surface.row(task.task_id).get_by_role("img", name="Pending question")).to_have_count(1)
    since = surface.mark()
    hold_first_load(api)

    surface.pick(task.task_id)  # load 1: held at the server
    wait_held(api, 1, "the first forced load is held")
    expect(surface.task_list()).to_have_attribute("aria-busy", "true")
    surface.pick(task.task_id)  # load 2 supersedes it

    # The newer activation aborted the older load: its read stopped waiting before anything
    # released it (it is still held, and was hit once).
    wait_held(api, 0, "the older load was aborted")
    assert fault(api)["hits"] == 1
    expect(surface.task_list()).to_have_attribute("aria-busy", "false")
    assert_shows_session(surface, task.task_id, task.secondary_id)
    expect(surface.overlay()).to_contain_text(task.question)
    if surface.phone:
        expect(surface.sheet()).to_have_count(0)

    api.release(LOAD_FAULT)  # nothing is left to release
    assert_shows_session(surface, task.task_id, task.secondary_id)
    expect(surface.overlay()).to_contain_text(task.question)
    # The aborted continuation never navigated: not to the task-only fallback, not anywhere.
    assert_only_visited(surface, since, session_path(task.task_id, task.secondary_id))


# -- S12 ------------------------------------------------------------------------------------


@pytest.mark.scenario("S12")
@pytest.mark.usefixtures("held_loads")
def test_the_older_of_two_loads_cannot_replace_the_newer_snapshot(
    surface: Surface, api: Api
) -> None:
    task: PendingTask = api.pending_task(unique(f"S12 {surface.kind}"), "Rebuild the index?")
    surface.open_list()
    row = surface.row(task.task_id)
    expect(row.get_by_role("img", name="Pending question")).to_have_count(1)
    clicked_at = summary(api, task.task_id)["revision"]
    since = surface.mark()
    hold_first_load(api)

    surface.pick(task.task_id)  # load 1: the task as clicked (pending; owner: the secondary)
    wait_held(api, 1, "the first forced load is held")

    # Ownership changes on the server: the question is skipped, the task is clean again.
    (bundle,) = api.bundles(task.secondary_id)
    api.post(f"/clarification/{bundle['pending_id']}/respond", {"rejected": True})
    api.wait_for(
        lambda: (lambda s: s["revision"] > clicked_at and s["pending_action"] is None)(
            summary(api, task.task_id)
        ),
        "the task summary moved on",
    )
    expect(row.get_by_role("img", name="Pending question")).to_have_count(0)  # the tab knows

    surface.pick(task.task_id)  # load 2: the newer truth

    wait_held(api, 0, "the older load ended without being released")
    expect(surface.task_list()).to_have_attribute("aria-busy", "false")
    # The newer snapshot decides: a clean task opens its primary session. The older load
    # would have sent the tab to the obsolete owner (the secondary session and its skipped
    # question) or, its summary revision being stale, to the task-only fallback.
    assert_shows_session(surface, task.task_id, task.primary_id)
    expect(surface.page.locator("#transcript")).to_contain_text("Ready.")
    expect(surface.overlay()).to_have_count(0)
    expect(surface.page.locator(f"#session-tab-{task.secondary_id}")).to_have_attribute(
        "aria-selected", "false"
    )

    api.release(LOAD_FAULT)
    assert_shows_session(surface, task.task_id, task.primary_id)
    expect(surface.overlay()).to_have_count(0)
    assert_only_visited(surface, since, session_path(task.task_id, task.primary_id))
    assert api.bundles(task.secondary_id) == []  # the obsolete question stayed skipped


# -- S41 ------------------------------------------------------------------------------------


def delete_task(api: Api, task_id: str) -> None:
    """Delete through the API; a task whose turn is still finishing answers 409 ``task_busy``
    until it is done, so retry on that only."""

    def attempt() -> bool:
        response = api.client.delete(f"/tasks/{task_id}")
        if response.status_code == 409 and response.json().get("error") == "task_busy":
            return False
        assert response.status_code == 204, response.text
        return True

    api.wait_for(attempt, f"task {task_id} deleted")


@pytest.mark.scenario("S41")
@pytest.mark.usefixtures("held_loads")
def test_a_task_deleted_during_its_load_leaves_the_selection_unchanged(
    surface: Surface, api: Api
) -> None:
    kept = api.post("/tasks", {"title": unique(f"S41 kept {surface.kind}")})
    kept_session = api.post(f"/tasks/{kept['id']}/task-sessions", {"prompt": "/reply Kept."})
    api.idle(kept_session["id"], kept["id"])
    doomed = api.pending_task(unique(f"S41 deleted {surface.kind}"), "Drop the old API?")

    surface.pick(kept["id"])  # select task A: its only session opens
    assert_shows_session(surface, kept["id"], kept_session["id"])
    transcript = surface.page.locator("#transcript")
    expect(transcript).to_contain_text("Kept.")
    expect(surface.task_list()).to_have_attribute("aria-busy", "false")
    since = surface.mark()
    hold_first_load(api)

    surface.pick(doomed.task_id)  # task B: its forced load is held
    wait_held(api, 1, "the forced load of the doomed task is held")
    expect(surface.task_list()).to_have_attribute("aria-busy", "true")

    delete_task(api, doomed.task_id)
    expect(surface.row(doomed.task_id)).to_have_count(0)  # live updates removed it

    api.release(LOAD_FAULT)
    # B's activation settled (the newest one of the tab) ...
    expect(surface.task_list()).to_have_attribute("aria-busy", "false")
    # ... and changed nothing: A and its session stay selected, nothing navigated.
    expect(surface.row(kept["id"])).to_have_attribute("aria-current", "page")
    expect(surface.row(doomed.task_id)).to_have_count(0)
    assert_only_visited(surface, since, None)
    if surface.phone:
        expect(surface.sheet()).to_be_visible()  # not closed by an inert continuation
        surface.sheet().get_by_role("button", name="Close").click()
        expect(surface.sheet()).to_have_count(0)
    assert_shows_session(surface, kept["id"], kept_session["id"])
    expect(transcript).to_contain_text("Kept.")
    expect(surface.page.locator("main")).not_to_contain_text("Task not found")
    assert re.search(rf"/sessions/{kept_session['id']}$", surface.page.url)


# -- S14 ------------------------------------------------------------------------------------

#: Flags any moment the page shows task B's heading together with task A's transcript: the
#: outgoing session layout outliving the switch to the fallback task route.
_WATCH_MIXED_LAYOUT = """
([incomingTitle, outgoingText]) => {
  window.__mixedLayout = false;
  const check = () => {
    const heading = document.querySelector('main h2');
    const transcript = document.getElementById('transcript');
    if (heading && heading.textContent.includes(incomingTitle)
        && transcript && transcript.textContent.includes(outgoingText)) {
      window.__mixedLayout = true;
    }
  };
  new MutationObserver(check).observe(document.body,
    {subtree: true, childList: true, characterData: true});
}
"""


@pytest.mark.scenario("S14")
@pytest.mark.usefixtures("held_loads")
def test_the_fallback_releases_the_outgoing_session_layout(surface: Surface, api: Api) -> None:
    outgoing = api.post("/tasks", {"title": unique(f"S14 open {surface.kind}")})
    outgoing_session = api.post(
        f"/tasks/{outgoing['id']}/task-sessions", {"prompt": "/reply Outgoing transcript."}
    )
    api.idle(outgoing_session["id"], outgoing["id"])
    pending = api.pending_task(unique(f"S14 pending {surface.kind}"), "Keep the old schema?")

    surface.pick(outgoing["id"])  # a session layout is on screen: transcript, tabs, composer
    assert_shows_session(surface, outgoing["id"], outgoing_session["id"])
    expect(surface.page.locator("#transcript")).to_contain_text("Outgoing transcript.")
    surface.page.evaluate(_WATCH_MIXED_LAYOUT, [pending.title, "Outgoing transcript."])
    hold_first_load(api)

    surface.pick(pending.task_id)  # the pending task's forced load waits at the server
    wait_held(api, 1, "the forced load is held")
    # Meanwhile its question is skipped elsewhere: when the load settles, no session owns it.
    (bundle,) = api.bundles(pending.secondary_id)
    api.post(f"/clarification/{bundle['pending_id']}/respond", {"rejected": True})
    api.wait_for(
        lambda: summary(api, pending.task_id).get("pending_action") is None,
        "the pending action is gone",
    )
    api.release(LOAD_FAULT)

    # The fallback: the task-only route, with nothing of the outgoing session left.
    expect(surface.page).to_have_url(f"{surface.app_url}/tasks/{pending.task_id}")
    expect(surface.task_list()).to_have_attribute("aria-busy", "false")
    main = surface.page.locator("main")
    expect(main).to_contain_text("No session selected")
    expect(surface.page.locator("#transcript")).to_have_count(0)
    expect(surface.page.locator(f"#session-tab-{outgoing_session['id']}")).to_have_count(0)
    expect(surface.overlay()).to_have_count(0)
    if surface.phone:
        expect(surface.sheet()).to_have_count(0)
    assert surface.page.evaluate("window.__mixedLayout") is False, (
        "the outgoing session's transcript was shown under the pending task"
    )
