"""The app process dies and comes back: a detached question survives it in the browser, and an
answer whose delivery the crash interrupted reaches the agent exactly once (S01 + S21).

The server is killed twice: first with SIGKILL to its whole process group while the question
waits detached (a power cut: no shutdown hooks), then by the ``respond.after_claim`` ``crash``
fault point in the middle of the browser's answer, after the answer's claim committed and
before anything was delivered. Each time it is started again on the same port and database and
the page is reloaded. Desktop and phone viewports.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.api import Api
from tests.e2e.server import AppServer
from tests.e2e.viewports import DESKTOP, PHONE

pytestmark = pytest.mark.e2e

SURFACES = {"desktop": DESKTOP, "phone": PHONE}


@pytest.fixture(params=list(SURFACES))
def surface(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def page(surface: str, browser: Browser) -> Iterator[Page]:
    context = browser.new_context(**SURFACES[surface])
    yield context.new_page()
    context.close()


def _activate(page: Page, surface: str, task_id: str) -> None:
    """Pick the task the way a person does on this surface."""
    if surface == "phone":
        page.get_by_role("button", name="Tasks", exact=True).click()
        page.locator(f"#sheet-task-row-{task_id}").click()
    else:
        page.locator(f"#task-row-{task_id}").click()


def _overlay(page: Page) -> Any:
    return page.get_by_role("dialog", name="Agent question")


def _prompts_for(api: Api, session_id: str) -> list[dict[str, Any]]:
    return [p for p in api.agent_prompts() if p["session_id"] == session_id]


def _fault_point_gone(api: Api, name: str) -> bool:
    """True once the process that armed ``name`` is gone (refused, or a fresh process)."""
    try:
        response = api.client.get("/_test/failpoints")
    except httpx.HTTPError:
        return True
    return response.status_code != 200 or name not in response.json()["failpoints"]


@pytest.mark.scenario("S01")
@pytest.mark.scenario("S21")
def test_detached_question_survives_restarts_and_is_delivered_once(
    page: Page, surface: str, app_server: AppServer, api: Api
) -> None:
    task = api.pending_task(
        f"Survive a restart ({surface})", "Ship it after the restart?", ("Ship", "Wait")
    )
    session_url = re.compile(rf"/tasks/{task.task_id}/sessions/{task.secondary_id}$")
    page.goto(app_server.url)
    _activate(page, surface, task.task_id)
    expect(page).to_have_url(session_url)
    expect(_overlay(page)).to_contain_text(task.question)
    assert len(_prompts_for(api, task.secondary_id)) == 1  # the prompt that asked

    # 1. A power cut while the question waits detached.
    app_server.kill()
    app_server.start()
    page.reload()
    overlay = _overlay(page)
    expect(overlay).to_contain_text(task.question)
    assert api.task(task.task_id)["status_summary"]["pending_action"] == "clarification"
    done = {"workflow_step_id": _done(api, task.task_id)}
    move = api.client.post(f"/tasks/{task.task_id}/move", json=done)
    assert move.status_code == 409, move.text  # completion stays blocked (S01)

    # 2. The process dies after the browser's answer was claimed, before delivery.
    api.client.put("/_test/failpoints/respond.after_claim", json={"action": "crash"})
    overlay.get_by_role("button", name="Ship").click()
    overlay.get_by_role("button", name="Submit answer").click()
    api.wait_for(lambda: _fault_point_gone(api, "respond.after_claim"), "the crash")
    app_server.restart_after_crash()
    assert len(_prompts_for(api, task.secondary_id)) == 1, "the claim alone reached the agent"

    # Recovery put the question back: the reloaded page offers it again, and answering works.
    page.reload()
    overlay = _overlay(page)
    expect(overlay).to_contain_text(task.question)
    overlay.get_by_role("button", name="Ship").click()
    overlay.get_by_role("button", name="Submit answer").click()
    expect(overlay).to_have_count(0)
    # The agent's reply names the answer it received.
    expect(page.locator("#transcript")).to_contain_text(re.compile("Got:.*Ship"), timeout=20_000)

    resumes = _prompts_for(api, task.secondary_id)[1:]
    assert len(resumes) == 1, resumes  # exactly once
    assert api.bundles(task.secondary_id) == []
    assert api.task(task.task_id)["status_summary"]["pending_action"] is None
    page.reload()
    expect(page.locator("#transcript")).to_contain_text("Got:")
    expect(_overlay(page)).to_have_count(0)


def _done(api: Api, task_id: str) -> str:
    """The id of the "Done" step of the task's workflow."""
    workflow_id = api.task(task_id)["workflow_id"]
    steps = api.get(f"/workflows/{workflow_id}/snapshot")["steps"]
    return next(s["id"] for s in steps if s["name"] == "Done")
