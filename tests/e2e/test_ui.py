"""The workspace UI in a browser, desktop (1280x800) and phone (390x844).

Activation of a task whose *secondary* session owns the question opens that session and shows
the question (S09), from the desktop sidebar and from the phone task sheet (which closes);
answering and skipping close the overlay and clear the task's icon; a stale overlay answered
after its question was superseded is closed by the 409 conflict handling without prompting the
agent (S15); the board shows the workflow's steps, moves a dragged card, and shows the guard's
refusal. Screenshots go to ``tests/artifacts``. The click-to-question time is a benchmark
(``benchmarks/activation.py``), not a test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from tests.e2e.api import Api, PendingTask
from tests.e2e.viewports import DESKTOP, PHONE

pytestmark = pytest.mark.e2e

SEEDED_PENDING_TITLE = "Fix the login redirect loop"
SEEDED_QUESTION = "Should the fix also cover the legacy /signin route?"


@pytest.fixture
def desktop(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(**DESKTOP)
    yield context.new_page()
    context.close()


@pytest.fixture
def phone_context(browser: Browser) -> Iterator[BrowserContext]:
    context = browser.new_context(**PHONE)
    yield context
    context.close()


@pytest.fixture(scope="module")
def seeded(api: Api) -> PendingTask:
    """The seeded task whose secondary session owns the question (left unanswered here)."""
    task = api.task_by_title(SEEDED_PENDING_TITLE)
    sessions = api.sessions(task["id"])
    primary = next(s for s in sessions if s["is_primary"])
    secondary = next(s for s in sessions if not s["is_primary"])
    assert secondary["pending_action"] == "clarification"
    assert primary["pending_action"] is None
    return PendingTask(
        task["id"], task["title"], primary["id"], secondary["id"], SEEDED_QUESTION, ()
    )


def _session_url(app_url: str, task: PendingTask) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(app_url)}/tasks/{task.task_id}/sessions/{task.secondary_id}$")


def _overlay(page: Page) -> Any:
    return page.get_by_role("dialog", name="Agent question")


def _no_sideways_scroll(page: Page) -> None:
    scroll_width, inner_width = page.evaluate(
        "[document.scrollingElement.scrollWidth, window.innerWidth]"
    )
    assert scroll_width <= inner_width, "the page scrolls sideways on a phone"


def _open_sheet(page: Page) -> Any:
    page.get_by_role("button", name="Tasks", exact=True).click()
    sheet = page.get_by_role("dialog", name="Tasks")
    expect(sheet).to_be_visible()
    return sheet


# -- S09: the pending owner outranks the primary session ------------------------------------


@pytest.mark.scenario("S09")
def test_desktop_activation_opens_the_secondary_session_with_its_question(
    desktop: Page, app_url: str, seeded: PendingTask, artifacts_dir: Path
) -> None:
    desktop.goto(app_url)
    row = desktop.locator(f"#task-row-{seeded.task_id}")
    expect(row).to_have_accessible_name(seeded.title)
    expect(row.get_by_role("img", name="Pending question")).to_have_count(1)
    desktop.screenshot(path=artifacts_dir / "desktop-sidebar.png")

    row.click()

    expect(desktop).to_have_url(_session_url(app_url, seeded))
    overlay = _overlay(desktop)
    expect(overlay).to_be_visible()
    expect(overlay).to_contain_text(seeded.question)
    expect(desktop.locator(f"#session-tab-{seeded.secondary_id}")).to_have_attribute(
        "aria-selected", "true"
    )
    expect(desktop.locator(f"#session-tab-{seeded.primary_id}")).to_have_attribute(
        "aria-selected", "false"
    )
    expect(desktop.locator("#transcript")).to_contain_text(seeded.question)
    desktop.screenshot(path=artifacts_dir / "desktop-overlay.png")

    # The primary tab is clean: opening it shows no overlay, and it is remembered by URL.
    desktop.locator(f"#session-tab-{seeded.primary_id}").click()
    expect(desktop).to_have_url(re.compile(rf"/sessions/{seeded.primary_id}$"))
    expect(_overlay(desktop)).to_have_count(0)
    expect(desktop.locator("#transcript")).to_contain_text("Reproduce the redirect loop")
    desktop.screenshot(path=artifacts_dir / "desktop-chat.png")


@pytest.mark.scenario("S09")
def test_phone_sheet_activation_closes_the_sheet_and_shows_the_question(
    phone_context: BrowserContext, app_url: str, seeded: PendingTask, artifacts_dir: Path
) -> None:
    page = phone_context.new_page()
    page.goto(app_url)
    expect(page.locator(f"#task-row-{seeded.task_id}")).to_be_visible()
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "phone-tasks.png")

    sheet = _open_sheet(page)
    expect(page.locator("#task-sheet")).to_have_role("dialog")
    row = page.locator(f"#sheet-task-row-{seeded.task_id}")
    expect(row.get_by_role("img", name="Pending question")).to_have_count(1)
    page.screenshot(path=artifacts_dir / "phone-sheet.png")

    row.click()

    expect(page).to_have_url(_session_url(app_url, seeded))
    expect(sheet).to_have_count(0)
    overlay = _overlay(page)
    expect(overlay).to_be_visible()
    expect(overlay).to_contain_text(seeded.question)
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "phone-overlay.png")


def _permission_card(page: Page) -> Any:
    return page.get_by_role("dialog", name="Permission request")


def test_a_permission_request_is_answered_in_the_overlay(
    desktop: Page, app_url: str, api: Api, artifacts_dir: Path
) -> None:
    """The agent asks before a tool call (``/permit``): the task opens its owner with the
    permission card; one click sends that option, the agent hears it and goes on."""
    task_id, session_id = api.permission_task(
        "Clean the build", "/reply Checking.\n/permit Delete the build directory? | Allow | Reject"
    )
    desktop.goto(app_url)
    row = desktop.locator(f"#task-row-{task_id}")
    expect(row.get_by_role("img", name="Pending question")).to_have_count(1)
    row.click()
    expect(desktop).to_have_url(re.compile(rf"/sessions/{session_id}$"))
    card = _permission_card(desktop)
    expect(card).to_be_visible()
    expect(card.locator("#permission-title")).to_have_text("Delete the build directory?")
    expect(_overlay(desktop)).to_have_count(0)  # not a question: no answer text, no Skip
    request = desktop.locator("#transcript [data-kind=permission]")
    expect(request).to_contain_text("Waiting for you")
    expect(request).to_contain_text("Allow · Reject")
    desktop.screenshot(path=artifacts_dir / "desktop-permission.png")

    card.get_by_role("group", name="Options").get_by_role("button", name="Allow").click()

    expect(card).to_have_count(0)
    expect(desktop.locator("#transcript")).to_contain_text("Permission: Allow")
    expect(request).to_contain_text("Answered")
    expect(row.get_by_role("img", name="Pending question")).to_have_count(0)
    api.idle(session_id, task_id)
    assert api.pending_action(task_id) is None


def test_a_permission_request_is_answered_on_a_phone(
    phone_context: BrowserContext, app_url: str, api: Api, artifacts_dir: Path
) -> None:
    task_id, session_id = api.permission_task(
        "Push the release", "/permit Push the tag to origin? | Push | Not now"
    )
    page = phone_context.new_page()
    page.goto(f"{app_url}/tasks/{task_id}/sessions/{session_id}")
    card = _permission_card(page)
    expect(card).to_contain_text("Push the tag to origin?")
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "phone-permission.png")

    card.get_by_role("button", name="Not now").click()

    expect(card).to_have_count(0)
    expect(page.locator("#transcript")).to_contain_text("Permission: Not now")
    api.idle(session_id, task_id)
    assert api.pending_action(task_id) is None


# -- answering, skipping, conflicts ---------------------------------------------------------


def test_a_multi_select_question_takes_several_options(
    desktop: Page, app_url: str, api: Api
) -> None:
    task = api.pending_task(
        "Pick the release targets",
        "Which platforms ship first?",
        ("Web", "iOS", "Android"),
        detached=False,
        multi_select=True,
    )
    desktop.goto(app_url)
    desktop.locator(f"#task-row-{task.task_id}").click()
    overlay = _overlay(desktop)
    options = overlay.get_by_role("group", name="Options (several)")
    expect(overlay).to_contain_text("Pick all that apply.")
    options.get_by_role("button", name="Web").click()
    options.get_by_role("button", name="Android").click()
    for name, pressed in (("Web", "true"), ("iOS", "false"), ("Android", "true")):
        expect(options.get_by_role("button", name=name)).to_have_attribute("aria-pressed", pressed)
    overlay.get_by_role("button", name="Submit answer").click()

    expect(overlay).to_have_count(0)
    expect(desktop.locator("#transcript")).to_contain_text(
        "Got: Which platforms ship first?: Web, Android", timeout=20_000
    )


def test_desktop_answer_closes_the_overlay_and_clears_the_icon(
    desktop: Page, app_url: str, api: Api
) -> None:
    task = api.pending_task(
        "Pick the cache backend",
        "Which cache should the service use?",
        ("Redis", "In-process LRU"),
        detached=False,
    )
    desktop.goto(app_url)
    row = desktop.locator(f"#task-row-{task.task_id}")
    expect(row.get_by_role("img", name="Pending question")).to_have_count(1)
    row.click()
    overlay = _overlay(desktop)
    expect(overlay).to_contain_text(task.question)
    submit = overlay.get_by_role("button", name="Submit answer")
    expect(submit).to_be_disabled()

    overlay.get_by_role("button", name="In-process LRU").click()
    expect(overlay.get_by_role("button", name="In-process LRU")).to_have_attribute(
        "aria-pressed", "true"
    )
    submit.click()

    expect(overlay).to_have_count(0)
    expect(row.get_by_role("img", name="Pending question")).to_have_count(0)
    transcript = desktop.locator("#transcript")
    expect(transcript).to_contain_text("Answered")
    # The live waiter got the answer; the agent's reply arrives through live updates.
    expect(transcript).to_contain_text("Got:", timeout=20_000)
    assert (api.task(task.task_id)["status_summary"] or {}).get("pending_action") is None


def test_multi_question_bundle_pages_through_and_answers_with_text(
    desktop: Page, app_url: str, api: Api, artifacts_dir: Path
) -> None:
    task = api.pending_task(
        "Plan the release",
        "Which version number?",
        ("2.0.0", "1.5.0"),
        extra_questions=("Anything to add to the changelog?",),
    )
    desktop.goto(app_url)
    desktop.locator(f"#task-row-{task.task_id}").click()
    overlay = _overlay(desktop)
    expect(overlay).to_contain_text("1 of 2")
    overlay.get_by_role("button", name="2.0.0").click()
    overlay.get_by_role("button", name="Next").click()
    expect(overlay).to_contain_text("Anything to add to the changelog?")
    text = overlay.locator("[id^=clarification-text-]")
    text.fill("Mention the new board view.")
    expect(overlay.get_by_role("button", name="Submit answer")).to_be_enabled()
    desktop.screenshot(path=artifacts_dir / "desktop-overlay-carousel.png")
    overlay.get_by_role("button", name="Previous").click()
    expect(overlay.get_by_role("button", name="2.0.0")).to_have_attribute("aria-pressed", "true")

    overlay.get_by_role("button", name="Submit answer").click()

    expect(overlay).to_have_count(0)
    row = desktop.locator(f"#task-row-{task.task_id}")
    expect(row.get_by_role("img", name="Pending question")).to_have_count(0)
    # A detached answer resumes the agent with a new turn: its reply shows up live.
    expect(desktop.locator("#transcript")).to_contain_text("Got:", timeout=20_000)


def test_phone_skip_rejects_the_visible_bundle(
    phone_context: BrowserContext, app_url: str, api: Api
) -> None:
    task = api.pending_task("Rename the settings page", "Keep the old URL as a redirect?")
    prompts_before = len(api.agent_prompts())
    page = phone_context.new_page()
    page.goto(app_url)
    _open_sheet(page)
    page.locator(f"#sheet-task-row-{task.task_id}").click()
    overlay = _overlay(page)
    expect(overlay).to_contain_text(task.question)

    overlay.get_by_role("button", name="Skip").click()

    expect(overlay).to_have_count(0)
    expect(page.locator("#transcript")).to_contain_text("Skipped")
    assert api.bundles(task.secondary_id) == []
    assert (api.task(task.task_id)["status_summary"] or {}).get("pending_action") is None
    # A detached Skip is persisted without resuming the agent.
    assert len(api.agent_prompts()) == prompts_before
    page.goto(app_url)
    expect(
        page.locator(f"#task-row-{task.task_id}").get_by_role("img", name="Pending question")
    ).to_have_count(0)


@pytest.mark.scenario("S15")
def test_stale_overlay_is_closed_by_the_conflict_without_prompting_the_agent(
    desktop: Page, app_url: str, api: Api
) -> None:
    task = api.pending_task("Tune the retry policy", "Retry on 429 as well?")
    desktop.goto(app_url)
    desktop.locator(f"#task-row-{task.task_id}").click()
    overlay = _overlay(desktop)
    expect(overlay).to_contain_text(task.question)

    api.hold("ui.events")  # this browser stops hearing about the newer turn
    try:
        api.prompt(task.secondary_id, "/reply Never mind, I found the answer.")
        api.wait_for(lambda: api.bundles(task.secondary_id) == [], "question superseded")
        prompts_before = len(api.agent_prompts())
        expect(overlay).to_be_visible()  # stale: still showing the superseded question

        overlay.get_by_role("button", name="Yes").click()
        overlay.get_by_role("button", name="Submit answer").click()

        expect(overlay).to_have_count(0)
        expect(desktop.locator("#chat-notice")).to_contain_text("no longer active")
        assert len(api.agent_prompts()) == prompts_before, "the stale answer reached the agent"
    finally:
        api.release("ui.events")
    expect(desktop.locator("#transcript")).to_contain_text("Never mind", timeout=20_000)


@pytest.mark.scenario("S11")
@pytest.mark.scenario("S38")
@pytest.mark.parametrize("surface", ["desktop", "phone"])
def test_ownership_change_during_the_load_falls_back_to_the_task_route(
    surface: str, browser: Browser, app_url: str, api: Api, artifacts_dir: Path
) -> None:
    task = api.pending_task(f"Trim the {surface} logs", "Keep debug logs for a week?")
    context = browser.new_context(**(PHONE if surface == "phone" else DESKTOP))
    try:
        page = context.new_page()
        page.goto(app_url)
        if surface == "phone":
            _open_sheet(page)
            row = page.locator(f"#sheet-task-row-{task.task_id}")
        else:
            row = page.locator(f"#task-row-{task.task_id}")
        expect(row.get_by_role("img", name="Pending question")).to_have_count(1)

        api.hold("sessions.list")  # the forced session load waits at the server
        try:
            row.click()
            (bundle,) = api.bundles(task.secondary_id)
            api.post(f"/clarification/{bundle['pending_id']}/respond", {"rejected": True})
            api.wait_for(
                lambda: (
                    (api.task(task.task_id)["status_summary"] or {}).get("pending_action") is None
                ),
                "the summary changed while the load was in flight",
            )
        finally:
            api.release("sessions.list")

        expect(page).to_have_url(f"{app_url}/tasks/{task.task_id}")
        expect(page.locator("main")).to_contain_text("No session selected")
        expect(_overlay(page)).to_have_count(0)
        expect(page.get_by_role("dialog", name="Tasks")).to_have_count(0)
        if surface == "desktop":
            page.screenshot(path=artifacts_dir / "desktop-task-route.png")
    finally:
        context.close()


# -- board, forms ---------------------------------------------------------------------------


def test_board_shows_the_steps_and_the_guard_refusal(
    desktop: Page, app_url: str, api: Api, seeded: PendingTask, artifacts_dir: Path
) -> None:
    desktop.goto(f"{app_url}/board")
    board = desktop.locator("#board")
    expect(board).to_be_visible()
    workflow_id = api.task(seeded.task_id)["workflow_id"]
    steps = api.get(f"/workflows/{workflow_id}/snapshot")["steps"]
    for step in steps:
        column = desktop.locator(f"#board-step-{step['id']}")
        expect(column).to_contain_text(step["name"])
        for task in step["tasks"]:
            expect(column).to_contain_text(task["title"])
    desktop.screenshot(path=artifacts_dir / "desktop-board.png")

    # The workflow guard: a task with an open question cannot leave its step.
    desktop.get_by_role("button", name=f"Move {seeded.title}").click()
    desktop.get_by_role("menuitem", name="Done").click()
    expect(desktop.locator("#board-notice")).to_contain_text("open agent question")
    in_progress = next(s for s in steps if s["id"] == api.task(seeded.task_id)["workflow_step_id"])
    expect(desktop.locator(f"#board-step-{in_progress['id']}")).to_contain_text(seeded.title)


def _drag_over(page: Page, card: Any, column: Any) -> None:
    """Press on ``card`` and move the pointer sideways into ``column`` (button still down).

    Columns are as tall as the board, so the point level with the card lies in every column,
    however far the board was scrolled to reach the card.
    """
    card.scroll_into_view_if_needed()
    start, end = card.bounding_box(), column.bounding_box()
    assert start is not None and end is not None
    y = start["y"] + start["height"] / 2
    page.mouse.move(start["x"] + start["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(end["x"] + end["width"] / 2, y, steps=8)


def test_dragging_a_card_onto_a_column_moves_it_through_the_guard(
    desktop: Page, app_url: str, api: Api, seeded: PendingTask
) -> None:
    # A Backlog taller than the window: the card is reached by scrolling the board.
    for n in range(12):
        api.post("/tasks", {"title": f"Backlog filler {n + 1}"})
    created = api.post("/tasks", {"title": "Drag me to Review"})
    review = api.step_id(created["id"], "Review")
    done = api.step_id(seeded.task_id, "Done")
    guarded_step = api.task(seeded.task_id)["workflow_step_id"]
    desktop.goto(f"{app_url}/board")
    card = desktop.locator(f"#board-drag-{created['id']}")
    expect(card).to_be_visible()

    target = desktop.locator(f"#board-step-{review}")
    _drag_over(desktop, card, target)
    expect(target).to_have_attribute("data-drop-over", "true")
    # The highlight (after its short transition): the column's colour differs from another's.
    desktop.wait_for_function(
        """([lit, other]) => getComputedStyle(document.getElementById(lit)).backgroundColor
            !== getComputedStyle(document.getElementById(other)).backgroundColor""",
        arg=[f"board-step-{review}", f"board-step-{done}"],
        timeout=5000,
    )
    desktop.mouse.up()
    expect(desktop.locator(f"#board-step-{review}")).to_contain_text("Drag me to Review")
    api.wait_for(
        lambda: api.task(created["id"])["workflow_step_id"] == review, "the dragged task moved"
    )
    expect(desktop.locator("[data-drop-over]")).to_have_count(0)

    # A task with an open question is refused by the same guard as the menu's move.
    _drag_over(
        desktop,
        desktop.locator(f"#board-drag-{seeded.task_id}"),
        desktop.locator(f"#board-step-{done}"),
    )
    desktop.mouse.up()
    expect(desktop.locator("#board-notice")).to_contain_text("open agent question")
    expect(desktop.locator(f"#board-step-{guarded_step}")).to_contain_text(seeded.title)
    assert api.task(seeded.task_id)["workflow_step_id"] == guarded_step


def test_phone_board_stacks_columns_without_sideways_scroll(
    phone_context: BrowserContext, app_url: str, artifacts_dir: Path
) -> None:
    page = phone_context.new_page()
    page.goto(app_url)
    page.get_by_role("button", name="Board", exact=True).click()
    expect(page.locator("#board")).to_be_visible()
    expect(page.locator("[id^=board-step-]").first).to_be_visible()
    _no_sideways_scroll(page)
    page.screenshot(path=artifacts_dir / "phone-board.png", full_page=True)


def test_new_task_then_start_session_reaches_the_agent(
    desktop: Page, app_url: str, api: Api
) -> None:
    desktop.goto(app_url)
    desktop.get_by_role("button", name="New task").click()
    dialog = desktop.get_by_role("dialog", name="New task")
    dialog.get_by_label("Title").fill("Document the board view")
    dialog.get_by_role("button", name="Create task").click()
    expect(dialog).to_have_count(0)
    task = api.wait_for(
        lambda: next((t for t in api.tasks() if t["title"] == "Document the board view"), None),
        "the new task exists",
    )
    expect(desktop).to_have_url(re.compile(rf"/tasks/{task['id']}$"))
    expect(desktop.locator(f"#task-row-{task['id']}")).to_be_visible()

    form = desktop.get_by_role("form", name="Start session")
    form.get_by_label("Prompt").fill("/reply Board docs drafted.")
    form.get_by_role("button", name="Start session").click()

    expect(desktop).to_have_url(re.compile(rf"/tasks/{task['id']}/sessions/[^/]+$"))
    transcript = desktop.locator("#transcript")
    expect(transcript).to_contain_text("Board docs drafted.", timeout=20_000)

    composer = desktop.locator("#composer")
    composer.fill("/reply Second turn done.")
    # The first turn is over on the server, and live updates told this tab so.
    (session,) = api.sessions(task["id"])
    api.idle(session["id"], task["id"])
    expect(desktop.get_by_text("The agent is working…")).to_have_count(0)
    desktop.get_by_role("button", name="Send").click()
    expect(transcript).to_contain_text("Second turn done.", timeout=20_000)
