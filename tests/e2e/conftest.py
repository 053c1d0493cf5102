"""Browser tests against the real app: ``reflex run --env prod`` on a free port.

Each test module gets its own database, once on SQLite and once on PostgreSQL (migrated and
seeded by the project's CLI) and its own app server (``tests/e2e/server.py``), which runs the
project's ACP mock agent for each session, so sessions, questions and answers work end to end
and no module sees another's data. The test API is on (fault points, the agent's prompt record).
All servers of a run share one Reflex build directory outside the checkout, so a ``scripts/run``
instance in the same checkout is neither rebuilt nor disturbed. A failing test keeps a
screenshot of every open page and the app's log under ``tests/artifacts/failures/``. The browser
is the system Chromium (Playwright's own download needs the open internet); without it these
tests are skipped, or fail under CI=true.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from playwright.sync_api import Browser, expect

from backend.catalog import WorkspaceView, list_workspaces_with_tasks
from backend.db.engine import create_engine
from tests.conftest import BACKENDS
from tests.e2e.api import Api
from tests.e2e.server import PROJECT_ROOT, AppDidNotStart, AppServer, prepare_database
from tests.e2e.viewports import CHROMIUM, CHROMIUM_ARGS
from tests.support import postgres
from tests.support.processes import free_port

T = TypeVar("T")

ARTIFACTS_DIR = PROJECT_ROOT / "tests" / "artifacts"
FAILURES_DIR = ARTIFACTS_DIR / "failures"

expect.set_options(timeout=15_000)


@pytest.fixture(scope="session", autouse=True)
def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    reason = f"{CHROMIUM} not found (install the Debian 'chromium' package)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot run under CI=true: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict) -> dict:
    return {
        **browser_type_launch_args,
        "executable_path": str(CHROMIUM),
        "args": [*browser_type_launch_args.get("args", []), *CHROMIUM_ARGS],
    }


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Screenshots for a human to look at (git-ignored)."""
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS_DIR


@pytest.fixture(scope="module", params=BACKENDS)
def e2e_database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A fresh database per test module and kind, migrated and seeded through the CLI."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("e2e-db") / "e2e.db"
        url = f"sqlite+aiosqlite:///{path}"
        _prepare(url)
        yield url
        return
    with postgres.scratch_database(postgres.server_url(request)) as url:
        _prepare(url)
        yield url


def _prepare(url: str) -> None:
    try:
        prepare_database(url)
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def e2e_web_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One Reflex build directory for the run: later app starts reuse its packages."""
    web = tmp_path_factory.mktemp("e2e-web") / "web"
    yield web
    shutil.rmtree(web, ignore_errors=True)  # the build (~150 MB)


@pytest.fixture(scope="module")
def app_server(
    e2e_database_url: str,
    e2e_web_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AppServer]:
    """The app in prod mode (UI, websocket and /api on one port) for one test module."""
    server = AppServer(
        database_url=e2e_database_url,
        port=free_port(),
        web_dir=e2e_web_dir,
        work_dir=tmp_path_factory.mktemp("e2e-app"),
    )
    try:
        server.start()
    except AppDidNotStart as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def app_url(app_server: AppServer) -> str:
    return app_server.url


@pytest.fixture(scope="module")
def api(app_url: str) -> Iterator[Api]:
    client = Api(app_url)
    yield client
    client.close()


# -- failure artifacts ------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On a failing e2e test, keep a screenshot of every open page and the app's log.

    Taken here, while the test's browser contexts are still open (fixture teardown closes
    them right after); the folder is named in the test's report.
    """
    report = yield
    if report.failed and report.when in ("setup", "call"):
        folder = _keep_failure_artifacts(item)
        if folder is not None:
            report.sections.append(("e2e artifacts", str(folder)))
    return report


def _keep_failure_artifacts(item: pytest.Item) -> Path | None:
    values = getattr(item, "funcargs", {})
    browsers = [v for v in values.values() if isinstance(v, Browser)]
    server = values.get("app_server")
    if not browsers and not isinstance(server, AppServer):
        return None
    folder = FAILURES_DIR / re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-150:]
    folder.mkdir(parents=True, exist_ok=True)
    shot = 0
    for browser in browsers:
        for context in browser.contexts:
            for page in context.pages:
                shot += 1
                with contextlib.suppress(Exception):  # a crashed page must not hide the failure
                    page.screenshot(path=folder / f"page-{shot}.png", full_page=True)
    if isinstance(server, AppServer):
        with contextlib.suppress(OSError):
            shutil.copyfile(server.log_path, folder / "app.log")
    return folder


@pytest.fixture(scope="module")
def seeded_workspaces(e2e_database_url: str) -> list[WorkspaceView]:
    """What the page should show, read through the backend's own read model.

    Run on a worker thread: Playwright's sync API owns this thread's event loop.
    """

    async def read() -> list[WorkspaceView]:
        engine = create_engine(e2e_database_url)
        try:
            return await list_workspaces_with_tasks(engine)
        finally:
            await engine.dispose()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        workspaces = pool.submit(asyncio.run, read()).result()
    assert workspaces, "the seed created no workspaces"
    assert any(ws.tasks for ws in workspaces), "the seed created no tasks"
    return workspaces
