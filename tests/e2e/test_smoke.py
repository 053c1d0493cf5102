"""The index page lists every task by workflow step, on a desktop (sidebar) and on a phone (the
same list full width), with the question icon exactly where the repository rule puts it."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from backend.catalog import WorkspaceView
from tests.e2e.viewports import PHONE

pytestmark = pytest.mark.e2e


def _expect_workspaces_shown(page: Page, workspaces: list[WorkspaceView]) -> None:
    sidebar = page.locator("#sidebar")
    for workspace in workspaces:
        for task in workspace.tasks:
            section = sidebar.get_by_role("region", name=task.step_name)
            row = section.locator(f"#task-row-{task.id}")
            expect(row).to_have_accessible_name(task.title)
            expect(row).to_contain_text(workspace.name)
            question = row.get_by_role("img", name="Pending question")
            expect(question).to_have_count(1 if task.pending_action else 0)


def test_desktop_page_lists_seeded_workspaces_and_tasks(
    page: Page, app_url: str, seeded_workspaces: list[WorkspaceView], artifacts_dir: Path
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(app_url)

    expect(page).to_have_title("Kandev")
    _expect_workspaces_shown(page, seeded_workspaces)
    page.screenshot(path=artifacts_dir / "e2e-index-desktop.png", full_page=True)


def test_phone_page_lists_the_same_without_horizontal_overflow(
    browser: Browser, app_url: str, seeded_workspaces: list[WorkspaceView], artifacts_dir: Path
) -> None:
    context = browser.new_context(**PHONE)
    try:
        page = context.new_page()
        page.goto(app_url)

        _expect_workspaces_shown(page, seeded_workspaces)
        scroll_width, inner_width = page.evaluate(
            "[document.scrollingElement.scrollWidth, window.innerWidth]"
        )
        assert scroll_width <= inner_width, "the page scrolls sideways on a phone"
        page.screenshot(path=artifacts_dir / "e2e-index-phone.png", full_page=True)
    finally:
        context.close()


def test_api_answers_on_the_app_port(app_url: str) -> None:
    with urllib.request.urlopen(f"{app_url}/api/v1/health", timeout=10) as response:
        assert response.status == 200
        assert json.load(response)["status"] == "ok"
