"""The active-clarification lifecycle in a browser, desktop (1280x800) and phone (390x844).

Each spec scenario runs on both layouts (on a phone, tasks are picked in the bottom-nav "Tasks"
sheet):

- S01: a detached question survives a reload, is answerable, keeps its icons, blocks the
  workflow move, and its answer reaches the agent exactly once;
- S02: a newer ordinary turn supersedes an older detached question: the overlay closes live and
  stays closed, the icons go, the question stays in the transcript, the move is allowed;
- S05: a question asked on a session the browser shows as clean: the event's own projection
  marks the session while pending discovery is still held, then the overlay appears live;
- S06: a task-session list read before a newer question event is delivered after it (and the
  reverse order): the older list cannot take the question's projection away;
- S07: skipping the newer of two bundles (the older one superseded) re-arms neither, after a
  reload and after a later turn completes.

Races are made deterministic with the test API's fault points (holds) and Playwright's waits;
nothing sleeps. Every test creates its own task under a unique title.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from tests.e2e.api import Api, PendingTask

pytestmark = pytest.mark.e2e

SURFACES = ["desktop", "phone"]
LAYOUTS: dict[str, dict[str, Any]] = {
    "desktop": {"viewport": {"width": 1280, "height": 800}},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "device_scale_factor": 2,
        "is_mobile": True,
        "has_touch": True,
    },
}
#: How long a reply that needs a full agent round trip may take to show up.
AGENT_REPLY_MS = 20_000


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def page(browser: Browser, surface: str) -> Iterator[Page]:
    """A fresh browser context with the ``surface``'s viewport (the test parametrizes it)."""
    context = browser.new_context(**LAYOUTS[surface])
    try:
        yield context.new_page()
    finally:
        context.close()


class Holds:
    """Fault-point holds of one test; whatever is still held is released at teardown, so a
    failing test cannot leave the shared app server stalled for the next one."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.held: list[str] = []

    def hold(self, name: str) -> None:
        self.api.hold(name)
        self.held.append(name)

    def hold_next(self, name: str) -> None:
        self.api.hold_next(name)
        self.held.append(name)

    def release(self, *names: str) -> None:
        for name in names:
            self.api.release(name)
            if name in self.held:
                self.held.remove(name)

    def release_all(self) -> None:
        for name in reversed(self.held):
            self.api.release(name)
        self.held.clear()


@pytest.fixture
def holds(api: Api) -> Iterator[Holds]:
    held = Holds(api)
    try:
        yield held
    finally:
        held.release_all()


# -- helpers --------------------------------------------------------------------------------


def _unique(text: str) -> str:
    return f"{text} {uuid.uuid4().hex[:6]}"


def _session_url(app_url: str, task_id: str, session_id: str) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(app_url)}/tasks/{task_id}/sessions/{session_id}$")


def _overlay(page: Page) -> Locator:
    return page.get_by_role("dialog", name="Agent question")


def _overlay_box(page: Page) -> Locator:
    """The overlay by id: while a phone sheet (a modal drawer) is open, the page behind it is
    hidden from the accessibility tree, so role locators do not see it."""
    return page.locator("#clarification-overlay")


def _transcript(page: Page) -> Locator:
    return page.locator("#transcript")


def _tab(page: Page, session_id: str) -> Locator:
    return page.locator(f"#session-tab-{session_id}")


def _tab_icon(page: Page, session_id: str) -> Locator:
    return _tab(page, session_id).get_by_role("img", name="Pending question")


def _tab_icon_box(page: Page, session_id: str) -> Locator:
    """The session tab's question icon by test id (usable while a phone sheet is open)."""
    return _tab(page, session_id).locator("[data-testid=pending-question]")


def _open_sheet(page: Page) -> Locator:
    page.get_by_role("button", name="Tasks", exact=True).click()
    sheet = page.get_by_role("dialog", name="Tasks")
    expect(sheet).to_be_visible()
    return sheet


def _close_sheet(page: Page, sheet: Locator) -> None:
    sheet.get_by_role("button", name="Close").click()
    expect(sheet).to_have_count(0)


def _task_row(page: Page, surface: str, task_id: str) -> Locator:
    """The row that activates the task: the desktop sidebar's, or the phone sheet's (the sheet
    is opened here)."""
    if surface == "phone":
        _open_sheet(page)
        return page.locator(f"#sheet-task-row-{task_id}")
    return page.locator(f"#task-row-{task_id}")


def _activate(page: Page, surface: str, task_id: str) -> None:
    """Pick the task in the sidebar (desktop) or the task sheet (phone, which then closes)."""
    _task_row(page, surface, task_id).click()
    if surface == "phone":
        expect(page.get_by_role("dialog", name="Tasks")).to_have_count(0)


def _expect_task_icon(page: Page, surface: str, task_id: str, count: int) -> None:
    """The task row's ``Pending question`` icon is shown (1) or not (0); on a phone the row is
    looked at in the task sheet, which is closed again afterwards."""
    if surface == "phone":
        sheet = _open_sheet(page)
        row = sheet.locator(f"#sheet-task-row-{task_id}")
        expect(row).to_be_visible()
        expect(row.get_by_role("img", name="Pending question")).to_have_count(count)
        _close_sheet(page, sheet)
    else:
        row = page.locator(f"#task-row-{task_id}")
        expect(row).to_be_visible()
        expect(row.get_by_role("img", name="Pending question")).to_have_count(count)


def _open_board(page: Page, surface: str) -> Locator:
    if surface == "phone":
        page.get_by_role("button", name="Board", exact=True).click()
    else:
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Board").click()
    board = page.locator("#board")
    expect(board).to_be_visible()
    return board


def _board_move(page: Page, surface: str, task: PendingTask, step: str) -> None:
    """On the board: the task's "Move" menu, then ``step``."""
    _open_board(page, surface)
    expect(page.locator(f"#board-card-{task.task_id}")).to_be_visible()
    page.get_by_role("button", name=f"Move {task.title}").click()
    page.get_by_role("menuitem", name=step).click()


def _answer(page: Page, question: str, option: str) -> None:
    """Answer the overlay's (single) question with ``option`` and submit."""
    overlay = _overlay(page)
    expect(overlay).to_contain_text(question)
    overlay.get_by_role("button", name=option).click()
    expect(overlay.get_by_role("button", name=option)).to_have_attribute("aria-pressed", "true")
    overlay.get_by_role("button", name="Submit answer").click()
    expect(overlay).to_have_count(0)


def _agent_rows(page: Page, text: str) -> Locator:
    return _transcript(page).locator("[data-kind=agent]").filter(has_text=text)


def _second_session(api: Api, task: PendingTask, reply: str) -> str:
    """A further, clean, non-primary session of ``task`` (newer than its question's owner)."""
    created = api.post(
        f"/tasks/{task.task_id}/task-sessions",
        {"prompt": f"/reply {reply}", "is_primary": False},
    )
    api.idle(created["id"], task.task_id)
    return created["id"]


# -- S01 ------------------------------------------------------------------------------------


@pytest.mark.scenario("S01")
@pytest.mark.parametrize("surface", SURFACES)
def test_detached_question_stays_answerable_blocks_the_move_and_is_answered_once(
    surface: str, page: Page, app_url: str, api: Api
) -> None:
    task = api.pending_task(
        _unique(f"S01 {surface} importer"),
        "Which cache should the importer use?",
        ("Redis", "In-process LRU"),
        detached=True,
    )
    (bundle,) = api.bundles(task.secondary_id)
    assert bundle["state"] == "active_detached"
    owner_url = _session_url(app_url, task.task_id, task.secondary_id)

    # A fresh page load: the row advertises the question, activation opens its owner.
    page.goto(app_url)
    _expect_task_icon(page, surface, task.task_id, 1)
    _activate(page, surface, task.task_id)
    expect(page).to_have_url(owner_url)
    expect(_overlay(page)).to_contain_text(task.question)

    # Reloading the session keeps the detached question visible and answerable.
    page.reload()
    overlay = _overlay(page)
    expect(overlay).to_contain_text(task.question)
    expect(overlay.get_by_role("button", name="Redis")).to_be_enabled()
    expect(_tab_icon(page, task.secondary_id)).to_have_count(1)
    expect(_tab_icon(page, task.primary_id)).to_have_count(0)
    _expect_task_icon(page, surface, task.task_id, 1)
    assert api.session(task.task_id, task.secondary_id)["pending_action"] == "clarification"
    assert api.pending_action(task.task_id) == "clarification"

    # Workflow completion stays blocked: over the API and on the board.
    refused = api.move(task.task_id, "Done")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"] == "clarification_pending"
    _board_move(page, surface, task, "Done")
    expect(page.locator("#board-notice")).to_contain_text("open agent question")
    backlog = api.step_id(task.task_id, "Backlog")
    expect(page.locator(f"#board-step-{backlog}")).to_contain_text(task.title)
    assert api.task(task.task_id)["workflow_step_id"] == backlog

    # Answered through the overlay, the answer reaches the agent exactly once.
    page.goto(f"{app_url}/tasks/{task.task_id}/sessions/{task.secondary_id}")
    prompts_before = api.prompts_of(task.secondary_id)
    _answer(page, task.question, "Redis")
    reply = f"Got: {task.question}: Redis"
    expect(_agent_rows(page, reply)).to_have_count(1, timeout=AGENT_REPLY_MS)
    api.idle(task.secondary_id, task.task_id)
    prompts = api.prompts_of(task.secondary_id)
    assert len(prompts) == len(prompts_before) + 1, prompts
    resumed = prompts[-1]
    turns = api.get(f"/task-sessions/{task.secondary_id}/turns")["turns"]
    assert resumed["turn_id"] == turns[-1]["id"]  # the resume turn, the session's newest
    replies = [
        m
        for m in api.messages(task.secondary_id)
        if m["author"] == "agent" and m["content"].startswith("Got:")
    ]
    assert [m["content"] for m in replies] == [reply]
    assert api.bundles(task.secondary_id) == []
    expect(_tab_icon(page, task.secondary_id)).to_have_count(0)
    _expect_task_icon(page, surface, task.task_id, 0)
    assert api.pending_action(task.task_id) is None


# -- S02 ------------------------------------------------------------------------------------


@pytest.mark.scenario("S02")
@pytest.mark.parametrize("surface", SURFACES)
def test_newer_turn_supersedes_the_detached_question_live_and_after_reload(
    surface: str, page: Page, app_url: str, api: Api
) -> None:
    task = api.pending_task(
        _unique(f"S02 {surface} export"),
        "Should the export include archived rows?",
        ("Include", "Leave out"),
        detached=True,
    )
    page.goto(app_url)
    _activate(page, surface, task.task_id)
    overlay = _overlay(page)
    expect(overlay).to_contain_text(task.question)
    expect(_tab_icon(page, task.secondary_id)).to_have_count(1)

    # A newer ordinary turn on the same session: the overlay closes live, no reload.
    api.prompt(task.secondary_id, "/reply Exporting active rows only.")
    expect(overlay).to_have_count(0)
    expect(_agent_rows(page, "Exporting active rows only.")).to_have_count(
        1, timeout=AGENT_REPLY_MS
    )
    expect(_transcript(page)).to_contain_text(task.question)  # history stays
    expect(_tab_icon(page, task.secondary_id)).to_have_count(0)
    _expect_task_icon(page, surface, task.task_id, 0)

    # ... and stays closed after a reload.
    api.idle(task.secondary_id, task.task_id)
    page.reload()
    expect(_transcript(page)).to_contain_text("Exporting active rows only.")
    expect(_transcript(page)).to_contain_text(task.question)
    expect(_overlay(page)).to_have_count(0)
    expect(_tab_icon(page, task.secondary_id)).to_have_count(0)
    _expect_task_icon(page, surface, task.task_id, 0)
    assert api.bundles(task.secondary_id) == []
    assert api.session(task.task_id, task.secondary_id)["pending_action"] is None
    assert api.pending_action(task.task_id) is None
    questions = [m for m in api.messages(task.secondary_id) if m["type"] == "clarification_request"]
    assert [m["metadata"]["question"] for m in questions] == [task.question]

    # No workflow barrier derives from the superseded row.
    _board_move(page, surface, task, "Done")
    done = api.step_id(task.task_id, "Done")
    expect(page.locator(f"#board-step-{done}")).to_contain_text(task.title)
    expect(page.locator("#board-notice")).to_have_count(0)
    assert api.task(task.task_id)["workflow_step_id"] == done


# -- S05 ------------------------------------------------------------------------------------


@pytest.mark.scenario("S05")
@pytest.mark.parametrize("surface", SURFACES)
def test_question_on_a_clean_session_marks_it_before_discovery_and_shows_live(
    surface: str, page: Page, app_url: str, api: Api, holds: Holds
) -> None:
    title = _unique(f"S05 {surface} schema")
    task = api.post("/tasks", {"title": title})
    session = api.post(f"/tasks/{task['id']}/task-sessions", {"prompt": "/reply Clean slate."})
    session_id = session["id"]
    api.idle(session_id, task["id"])
    question = "Which database should the schema target?"

    # The browser shows the session with an explicit clean projection.
    page.goto(app_url)
    _activate(page, surface, task["id"])
    expect(page).to_have_url(_session_url(app_url, task["id"], session_id))
    expect(_agent_rows(page, "Clean slate.")).to_have_count(1)
    tab = _tab(page, session_id)
    expect(tab).to_have_attribute("aria-label", "Primary (Idle)")
    expect(_tab_icon(page, session_id)).to_have_count(0)
    expect(_overlay(page)).to_have_count(0)

    # The agent is asked to ask; it reaches the backend, which holds it before storing.
    holds.hold("clarification.before_store")
    api.prompt(session_id, f"/ask {question} | PostgreSQL | SQLite")
    api.wait_held("clarification.before_store")
    # The new turn's own live update (session list + discovery) is complete in the browser.
    expect(tab).to_have_attribute("aria-label", "Primary (Running)")
    expect(_overlay(page)).to_have_count(0)

    # From now on neither pending discovery nor any session list can complete: only the
    # question's own message event can tell the browser about it.
    holds.hold("clarifications.list")
    holds.hold("sessions.list")
    holds.release("clarification.before_store")

    expect(_tab_icon(page, session_id)).to_have_count(1)  # the event's pending_action
    expect(_transcript(page)).to_contain_text(question)
    api.wait_held("clarifications.list")  # the discovery that event triggered is waiting
    expect(_overlay(page)).to_have_count(0)
    assert api.failpoint_hits("sessions.list") == 0  # no list read was asked for meanwhile

    holds.release("clarifications.list", "sessions.list")
    overlay = _overlay(page)
    expect(overlay).to_contain_text(question)  # live: no reload happened
    _answer(page, question, "PostgreSQL")
    expect(_agent_rows(page, f"Got: {question}: PostgreSQL")).to_have_count(
        1, timeout=AGENT_REPLY_MS
    )
    expect(_tab_icon(page, session_id)).to_have_count(0)


# -- S06 ------------------------------------------------------------------------------------


def _settled(page: Page, surface: str, row: Locator) -> None:
    """The held activation has finished: its row spinner is gone (desktop), its sheet closed
    (phone)."""
    if surface == "phone":
        expect(page.get_by_role("dialog", name="Tasks")).to_have_count(0)
    else:
        expect(row.locator(".rt-Spinner")).to_have_count(0)


def _in_flight(page: Page, surface: str, row: Locator) -> None:
    if surface == "phone":
        expect(page.locator("#task-sheet")).to_be_visible()
    else:
        expect(row.locator(".rt-Spinner")).to_have_count(1)


@pytest.mark.scenario("S06")
@pytest.mark.parametrize("surface", SURFACES)
def test_older_session_list_delivered_after_a_question_event_cannot_replace_it(
    surface: str, page: Page, app_url: str, api: Api, holds: Holds
) -> None:
    """Event first, list response later.

    The task already advertises a question (session 1), so activating it forces an
    authoritative session list; that read is held *after* it read session 2 as clean. Session
    2, open in the browser, then asks a question. When the older list is finally delivered,
    activation picks the newest session whose projection is ``clarification``: with the event's
    newer projection kept that is session 2 (the browser stays there); had the older list
    replaced it, session 2 would look clean and the browser would be sent to session 1.
    """
    task = api.pending_task(
        _unique(f"S06 {surface} release"), "Tag the release as beta?", ("Beta", "Stable")
    )
    second = _second_session(api, task, "Second session ready.")
    question = "Ship the migration tonight?"

    page.goto(app_url)
    _activate(page, surface, task.task_id)
    expect(_overlay(page)).to_contain_text(task.question)
    _tab(page, second).click()
    expect(page).to_have_url(_session_url(app_url, task.task_id, second))
    expect(_agent_rows(page, "Second session ready.")).to_have_count(1)
    expect(_overlay(page)).to_have_count(0)
    expect(_tab_icon(page, second)).to_have_count(0)

    holds.hold_next("sessions.list.after_read")  # only the activation's read is held
    row = _task_row(page, surface, task.task_id)
    row.click()
    api.wait_held("sessions.list.after_read")
    _in_flight(page, surface, row)

    api.prompt(second, f"/ask {question} | Tonight | Tomorrow")
    # The newer projection reaches the browser over the live channel while the list is held
    # (by id: on a phone the open sheet hides the page from role locators).
    expect(_tab_icon_box(page, second)).to_have_count(1)
    expect(_overlay_box(page)).to_contain_text(question)
    _in_flight(page, surface, row)

    holds.release("sessions.list.after_read")
    _settled(page, surface, row)
    expect(page).to_have_url(_session_url(app_url, task.task_id, second))
    expect(_overlay(page)).to_contain_text(question)
    expect(_tab_icon(page, second)).to_have_count(1)
    expect(_tab_icon(page, task.secondary_id)).to_have_count(1)
    _expect_task_icon(page, surface, task.task_id, 1)
    assert api.session(task.task_id, second)["pending_action"] == "clarification"

    # Still answerable.
    _answer(page, question, "Tomorrow")
    expect(_agent_rows(page, f"Got: {question}: Tomorrow")).to_have_count(1, timeout=AGENT_REPLY_MS)
    expect(_tab_icon(page, second)).to_have_count(0)


@pytest.mark.scenario("S06")
@pytest.mark.parametrize("surface", SURFACES)
def test_newer_question_event_delivered_after_an_older_session_list_still_wins(
    surface: str, page: Page, app_url: str, api: Api, holds: Holds
) -> None:
    """List response first, event later.

    Session 2's new turn has started and its question is at the backend's door when the
    activation's list reads session 2 (running, clean). The question event is then produced
    (a newer revision) but the browser's live updates are held, so the older list is applied
    first: activation opens session 1, the only owner it knows, and session 2 looks clean. The
    question event, delivered last, must still mark session 2 (no session list can do it: they
    are held) and its question must be answerable.
    """
    task = api.pending_task(
        _unique(f"S06r {surface} deploy"), "Deploy to staging first?", ("Yes", "No")
    )
    second = _second_session(api, task, "Second session ready.")
    question = "Rotate the API keys as well?"

    page.goto(app_url)
    _expect_task_icon(page, surface, task.task_id, 1)
    holds.hold("clarification.before_store")
    api.prompt(second, f"/ask {question} | Rotate | Keep")
    api.wait_held("clarification.before_store")

    holds.hold_next("sessions.list.after_read")  # only the activation's read is held
    row = _task_row(page, surface, task.task_id)
    row.click()
    api.wait_held("sessions.list.after_read")

    holds.hold("ui.events")  # the browser hears nothing until released
    holds.release("clarification.before_store")
    api.wait_for(lambda: api.bundles(second), "the newer question is stored")

    holds.release("sessions.list.after_read")
    _settled(page, surface, row)
    expect(page).to_have_url(_session_url(app_url, task.task_id, task.secondary_id))
    expect(_overlay(page)).to_contain_text(task.question)
    expect(_tab_icon(page, task.secondary_id)).to_have_count(1)
    expect(_tab(page, second)).to_have_attribute("aria-label", re.compile(r"\(Running\)$"))
    expect(_tab_icon(page, second)).to_have_count(0)  # what the older list said

    holds.hold("sessions.list")
    holds.release("ui.events")
    expect(_tab_icon(page, second)).to_have_count(1)  # the newer projection wins
    assert api.failpoint_hits("sessions.list") == 0  # ... by the event alone
    holds.release("sessions.list")
    _tab(page, second).click()
    expect(page).to_have_url(_session_url(app_url, task.task_id, second))
    _answer(page, question, "Rotate")
    expect(_agent_rows(page, f"Got: {question}: Rotate")).to_have_count(1, timeout=AGENT_REPLY_MS)
    expect(_tab_icon(page, second)).to_have_count(0)
    expect(_tab_icon(page, task.secondary_id)).to_have_count(1)


# -- S07 ------------------------------------------------------------------------------------


@pytest.mark.scenario("S07")
@pytest.mark.parametrize("surface", SURFACES)
def test_skipping_the_newer_bundle_rearms_neither_after_reload_or_a_later_turn(
    surface: str, page: Page, app_url: str, api: Api
) -> None:
    task = api.pending_task(
        _unique(f"S07 {surface} logging"),
        "Keep the debug logs for a week?",
        ("Keep", "Drop"),
        detached=True,
    )
    old_question = task.question
    new_question = "Rotate the logs daily instead?"
    api.prompt(task.secondary_id, f"/ask {new_question} | Daily | Weekly")
    api.wait_for(
        lambda: (
            [q["question"] for b in api.bundles(task.secondary_id) for q in b["questions"]]
            == [new_question]
        ),
        "only the newer bundle is active",
    )

    page.goto(app_url)
    _expect_task_icon(page, surface, task.task_id, 1)
    _activate(page, surface, task.task_id)
    expect(page).to_have_url(_session_url(app_url, task.task_id, task.secondary_id))
    overlay = _overlay(page)
    expect(overlay).to_contain_text(new_question)
    expect(overlay).not_to_contain_text(old_question)

    prompts_before = api.prompts_of(task.secondary_id)
    overlay.get_by_role("button", name="Skip").click()
    expect(overlay).to_have_count(0)
    transcript = _transcript(page)
    expect(transcript).to_contain_text("Skipped")
    # A live Skip goes to the waiting agent in the same turn (no new prompt).
    expect(_agent_rows(page, "Skipped.")).to_have_count(1, timeout=AGENT_REPLY_MS)
    api.idle(task.secondary_id, task.task_id)
    assert api.prompts_of(task.secondary_id) == prompts_before

    def nothing_rearmed() -> None:
        expect(transcript).to_contain_text(old_question)
        expect(transcript).to_contain_text(new_question)
        expect(_overlay(page)).to_have_count(0)
        expect(_tab_icon(page, task.secondary_id)).to_have_count(0)
        _expect_task_icon(page, surface, task.task_id, 0)
        assert api.bundles(task.secondary_id) == []
        assert api.session(task.task_id, task.secondary_id)["pending_action"] is None
        assert api.pending_action(task.task_id) is None

    page.reload()
    nothing_rearmed()

    # A later turn completes: the old bundle stays inert.
    api.prompt(task.secondary_id, "/reply Wrapped up, done.")
    expect(_agent_rows(page, "Wrapped up, done.")).to_have_count(1, timeout=AGENT_REPLY_MS)
    api.idle(task.secondary_id, task.task_id)
    nothing_rearmed()
    page.reload()
    expect(_agent_rows(page, "Wrapped up, done.")).to_have_count(1)
    nothing_rearmed()
    moved = api.move(task.task_id, "Done")
    assert moved.status_code == 200, moved.text  # no workflow barrier either
