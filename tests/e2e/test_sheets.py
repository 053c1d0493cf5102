"""Task sheets across layout classes, in a browser (phone 390, tablet 820, desktop 1280 wide).

The layout class is a client fact (``components/viewport.py``): the page mounts the phone sheet
only on a phone, the tablet sheet only on a tablet and none on a desktop, so resizing the window
really unmounts one ``TaskSheet`` instance and mounts another.

- S13: a forced session load pending in the phone sheet (held at the server by the
  ``sessions.list`` fault point) cannot navigate, change the active selection or close the
  tablet sheet that replaced it; the tablet sheet then picks normally.
- S43: two mounted sheets with in-flight selections do not invalidate each other. The
  responsive layout never mounts two sheets in one tab (that is the point of it), so the test
  uses a test-only page, ``/testing/sheets`` (registered only with ``KANDEV_TEST_API=1``), that
  mounts two production ``TaskSheet`` instances; the first sheet's footer opens the second on
  top of it, so both are open and pickable at once without touching either one's close path.
  A second window or tab would not do: each tab has its own activation flow.

Races are made deterministic with the hold fault point, polling its hit count on the server
and Playwright's waiting assertions; nothing sleeps.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from tests.e2e.api import Api, PendingTask
from tests.e2e.viewports import PHONE

pytestmark = pytest.mark.e2e

PHONE_SIZE = PHONE["viewport"]
TABLET_SIZE = {"width": 820, "height": 1180}
DESKTOP_SIZE = {"width": 1280, "height": 800}
SESSIONS_LIST = "sessions.list"


@pytest.fixture
def phone(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(**PHONE)
    yield context
    context.close()


# -- helpers ----------------------------------------------------------------------------------


def _unique(title: str) -> str:
    return f"{title} {uuid.uuid4().hex[:6]}"


def _hits(api: Api, point: str) -> int:
    return int((api.get("/_test/failpoints")["failpoints"].get(point) or {}).get("hits", 0))


def _wait_for_hits(api: Api, point: str, count: int) -> None:
    """Poll the server until ``point`` has been reached exactly ``count`` times."""

    def reached() -> bool:
        hits = _hits(api, point)
        assert hits <= count, f"{point} was reached {hits} times, expected {count}"
        return hits == count

    api.wait_for(reached, f"{point} reached {count} times")


def _session_url(app_url: str, task: PendingTask) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(app_url)}/tasks/{task.task_id}/sessions/{task.secondary_id}$")


def _overlay(page: Page) -> Locator:
    return page.get_by_role("dialog", name="Agent question")


def _phone_sheet(page: Page) -> Locator:
    return page.get_by_role("dialog", name="Tasks", exact=True)


def _tablet_sheet(page: Page) -> Locator:
    return page.get_by_role("dialog", name="Task list", exact=True)


def _open_sheet(page: Page, sheet: Locator) -> Locator:
    """The visible "Tasks" button (bottom navigation on a phone, top bar on a tablet)."""
    page.get_by_role("button", name="Tasks", exact=True).click()
    expect(sheet).to_be_visible()
    return sheet


_SLID_IN = """
(selector) => {
  const el = document.querySelector(selector);
  if (!el) return false;
  const box = el.getBoundingClientRect();
  const inside = box.left >= -0.5 && box.bottom <= window.innerHeight + 0.5;
  return inside && el.getAnimations().every((a) => a.playState !== "running");
}
"""


def _slid_in(page: Page, selector: str) -> None:
    """Wait until a drawer has finished sliding in (for screenshots that show it whole)."""
    page.wait_for_function(_SLID_IN, arg=selector)


def _no_sideways_scroll(page: Page) -> None:
    scroll_width, inner_width = page.evaluate(
        "[document.scrollingElement.scrollWidth, window.innerWidth]"
    )
    assert scroll_width <= inner_width, f"the page scrolls sideways at {inner_width}px"


@contextlib.contextmanager
def _held(api: Api, point: str) -> Iterator[None]:
    """Hold ``point`` for the ``with`` block; release it whatever happens."""
    api.hold(point)
    try:
        yield
    finally:
        api.release(point)


# -- S13 --------------------------------------------------------------------------------------


@pytest.mark.scenario("S13")
def test_resize_to_tablet_makes_the_phone_sheets_pending_load_inert(
    phone: BrowserContext, app_url: str, api: Api, artifacts_dir: Path
) -> None:
    task = api.pending_task(_unique("Resize while loading"), "Ship it behind a flag?")
    page = phone.new_page()
    page.goto(app_url)
    sheet = _open_sheet(page, _phone_sheet(page))
    expect(page.locator("#task-sheet")).to_have_role("dialog")
    row = page.locator(f"#sheet-task-row-{task.task_id}")
    expect(row.get_by_role("img", name="Pending question")).to_have_count(1)
    home_row = page.locator(f"#task-row-{task.task_id}")  # the home list behind the sheet

    with _held(api, SESSIONS_LIST):
        row.click()
        _wait_for_hits(api, SESSIONS_LIST, 1)  # the forced load waits at the server
        expect(home_row.locator(".rt-Spinner")).to_have_count(1)
        _slid_in(page, "#task-sheet")
        page.screenshot(path=artifacts_dir / "sheets-phone-loading.png")

        page.set_viewport_size(TABLET_SIZE)

        expect(page.locator("#task-sheet")).to_have_count(0)  # the phone sheet is unmounted
        expect(sheet).to_have_count(0)
        tablet_sheet = _open_sheet(page, _tablet_sheet(page))
        expect(page.locator("#tablet-task-sheet")).to_have_role("dialog")
        _slid_in(page, "#tablet-task-sheet")
        page.screenshot(path=artifacts_dir / "sheets-tablet-sheet.png")

    # The old continuation has settled (its row spinner is gone) without effect: no
    # navigation, no active task, and the replacement sheet is still open.
    expect(home_row.locator(".rt-Spinner")).to_have_count(0)
    expect(home_row).to_have_attribute("aria-current", "false")
    expect(page).to_have_url(f"{app_url}/")
    expect(tablet_sheet).to_be_visible()
    tablet_row = page.locator(f"#tablet-sheet-task-row-{task.task_id}")
    expect(tablet_row).to_have_attribute("aria-current", "false")

    # The tablet sheet picks normally: the pending owner's session, its question, sheet closed.
    expect(tablet_row.get_by_role("img", name="Pending question")).to_have_count(1)
    tablet_row.click()
    expect(page).to_have_url(_session_url(app_url, task))
    expect(page.locator("#tablet-task-sheet")).to_have_count(0)
    overlay = _overlay(page)
    expect(overlay).to_be_visible()
    expect(overlay).to_contain_text(task.question)
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "sheets-tablet-overlay.png")


# -- S43 --------------------------------------------------------------------------------------


@pytest.mark.scenario("S43")
def test_two_mounted_sheets_keep_their_own_selection(
    phone: BrowserContext, app_url: str, api: Api, artifacts_dir: Path
) -> None:
    first_pick = api.pending_task(_unique("First sheet pick"), "Keep the first sheet's pick?")
    second_pick = api.pending_task(_unique("Second sheet pick"), "Keep the second pick?")
    second_repick = api.pending_task(_unique("Second sheet repick"), "Keep the repick?")
    page = phone.new_page()
    page.goto(f"{app_url}/testing/sheets")
    page.get_by_role("button", name="Open the first sheet").click()
    first = page.locator("#first-sheet")
    second = page.locator("#second-sheet")
    expect(first).to_be_visible()
    expect(first).to_have_accessible_name("First sheet")

    with _held(api, SESSIONS_LIST):
        page.locator(f"#first-sheet-task-row-{first_pick.task_id}").click()
        _wait_for_hits(api, SESSIONS_LIST, 1)  # the first sheet's choice is in flight

        first.get_by_role("button", name="Open the second sheet").click()
        expect(second).to_be_visible()
        expect(second).to_have_accessible_name("Second sheet")
        page.locator(f"#second-sheet-task-row-{second_pick.task_id}").click()
        _wait_for_hits(api, SESSIONS_LIST, 2)  # both sheets have a choice in flight
        # Selecting again within the second sheet supersedes only its own choice.
        page.locator(f"#second-sheet-task-row-{second_repick.task_id}").click()
        _wait_for_hits(api, SESSIONS_LIST, 3)
        _slid_in(page, "#second-sheet")
        page.screenshot(path=artifacts_dir / "sheets-two-mounted.png")

        # Closing the second sheet makes only its own choice inert.
        second.get_by_role("button", name="Close").click()
        expect(second).to_have_count(0)
        expect(first).to_be_visible()

    # The first sheet's choice survived both: it opens its owner and closes its own sheet.
    expect(page).to_have_url(_session_url(app_url, first_pick))
    expect(_overlay(page)).to_contain_text(first_pick.question)
    expect(page.locator("#first-sheet")).to_have_count(0)
    expect(page.locator("#second-sheet")).to_have_count(0)


# -- the layout classes -----------------------------------------------------------------------


def test_widening_to_desktop_unmounts_an_open_sheet(
    phone: BrowserContext, app_url: str, api: Api, artifacts_dir: Path
) -> None:
    task = api.pending_task(_unique("Widen the window"), "Widen it further?")
    page = phone.new_page()
    page.goto(app_url)
    expect(page.locator(f"#task-row-{task.task_id}")).to_be_visible()
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "sheets-phone-home.png")
    _open_sheet(page, _phone_sheet(page))

    page.set_viewport_size(DESKTOP_SIZE)

    expect(page.get_by_role("dialog")).to_have_count(0)  # no sheet lingers over the desktop
    expect(page.locator("#task-sheet")).to_have_count(0)
    expect(page.locator("#tablet-task-sheet")).to_have_count(0)
    expect(page.locator("#sidebar")).to_be_visible()
    expect(page.get_by_role("button", name="Tasks", exact=True)).to_have_count(0)
    page.screenshot(path=artifacts_dir / "sheets-desktop-home.png")
    # Nothing of the drawer blocks the page: the sidebar picks.
    page.locator(f"#task-row-{task.task_id}").click()
    expect(page).to_have_url(_session_url(app_url, task))
    expect(_overlay(page)).to_contain_text(task.question)
    page.screenshot(path=artifacts_dir / "sheets-desktop-overlay.png")

    # Back to a tablet, then a phone: each mounts its own sheet, closed.
    page.set_viewport_size(TABLET_SIZE)
    expect(page.get_by_role("navigation", name="Tablet navigation")).to_be_visible()
    expect(page.locator("#tablet-task-sheet")).to_have_count(0)
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "sheets-tablet-session.png")
    page.set_viewport_size(PHONE_SIZE)
    expect(page.get_by_role("navigation", name="Phone navigation")).to_be_visible()
    expect(page.locator("#task-sheet")).to_have_count(0)
    _open_sheet(page, _phone_sheet(page))
    _slid_in(page, "#task-sheet")
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "sheets-phone-sheet.png")


def test_tablet_home_lists_tasks_and_navigates(
    browser: Browser, app_url: str, artifacts_dir: Path
) -> None:
    context = browser.new_context(viewport=TABLET_SIZE, has_touch=True)
    try:
        page = context.new_page()
        page.goto(app_url)
        nav = page.get_by_role("navigation", name="Tablet navigation")
        expect(nav).to_be_visible()
        expect(page.get_by_role("navigation", name="Phone navigation")).to_be_hidden()
        expect(page.locator("#sidebar [id^=task-row-]").first).to_be_visible()
        _no_sideways_scroll(page)
        page.screenshot(path=artifacts_dir / "sheets-tablet-home.png")
        nav.get_by_role("button", name="New task").click()
        dialog = page.get_by_role("dialog", name="New task")
        expect(dialog).to_be_visible()
        dialog.get_by_role("button", name="Cancel").click()
        expect(dialog).to_have_count(0)
        nav.get_by_role("button", name="Board").click()
        expect(page).to_have_url(f"{app_url}/board")
        expect(page.locator("#board")).to_be_visible()
        page.screenshot(path=artifacts_dir / "sheets-tablet-board.png")
    finally:
        context.close()
