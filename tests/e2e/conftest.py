"""Browser tests against the real app: ``reflex run --env prod`` on one free port.

One app server per test session, on its own SQLite database (migrated and seeded by the
project's CLI) and its own Reflex build directory, so a ``scripts/run`` instance in the same
checkout is neither rebuilt nor disturbed. The mock agent (agentctl stand-in) runs beside it, so
sessions, questions and answers work end to end; the test API is on (fault points, the agent's
prompt record). The browser is the system Chromium (Playwright's own download needs the open
internet); without it these tests are skipped, or fail under CI=true.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from playwright.sync_api import expect

from backend.catalog import WorkspaceView, list_workspaces_with_tasks
from backend.db.engine import create_engine
from tests.processes import MockAgentProcess, free_port

T = TypeVar("T")

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = PROJECT_ROOT / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
#: Without the networking flags Chromium floods a closed network with refused connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: The first production build of a fresh checkout installs the frontend packages.
START_TIMEOUT_S = float(os.environ.get("KANDEV_E2E_START_TIMEOUT", "180"))

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


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


class _LoopThread:
    """An event loop on its own thread for async helpers (the mock agent process) that must
    outlive one call: Playwright's sync API owns the main thread's loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="session")
def mock_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockAgentProcess]:
    """The mock agent process the app dispatches prompts to (stopped with its group)."""
    loop = _LoopThread()
    agent = MockAgentProcess(tmp_path_factory.mktemp("e2e-agent") / "state")
    try:
        loop.run(agent.start())
        yield agent
    finally:
        with contextlib.suppress(Exception):
            loop.run(agent.stop())
        loop.close()


def _server_env(tmp: Path, database_url: str, agent_url: str, public_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        KANDEV_AGENTCTL_URL=agent_url,
        KANDEV_PUBLIC_URL=public_url,
        KANDEV_TEST_API="1",
        KANDEV_AGENTCTL_ACK_TIMEOUT_S="5",
        KANDEV_DATABASE_URL=database_url,
        REFLEX_WEB_WORKDIR=str(tmp / "web"),
        REFLEX_STATES_WORKDIR=str(tmp / "states"),
        REFLEX_TELEMETRY_ENABLED="false",
        REFLEX_CHECK_LATEST_VERSION="false",
    )
    # bun from scripts/bootstrap, for runs that did not go through scripts/test.
    tools_bin = PROJECT_ROOT / ".tools" / "node_modules" / ".bin"
    if (tools_bin / "bun").exists():
        env["PATH"] = f"{tools_bin}{os.pathsep}{env.get('PATH', '')}"
        env["REFLEX_USE_SYSTEM_BUN"] = "1"
    return env


def _tail(path: Path, lines: int = 120) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server and everything it started (bun, granian workers): its process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)
    # Whatever is left of the group (a stuck leader, a stray worker) goes now.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


@pytest.fixture(scope="session")
def e2e_database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh SQLite database, migrated and seeded through the CLI the run script uses."""
    path = tmp_path_factory.mktemp("e2e-db") / "e2e.db"
    url = f"sqlite+aiosqlite:///{path}"
    env = {**os.environ, "KANDEV_DATABASE_URL": url}
    for command in ("migrate", "seed"):
        result = subprocess.run(
            [sys.executable, "-m", "backend.cli", command],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            pytest.fail(f"backend.cli {command} failed:\n{result.stdout}\n{result.stderr}")
    return url


@pytest.fixture(scope="session")
def app_url(
    e2e_database_url: str,
    mock_agent: MockAgentProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The base URL of the app, served in prod mode (UI, websocket and /api on one port)."""
    tmp = tmp_path_factory.mktemp("e2e-app")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    log_path = tmp / "reflex.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "reflex", "run", "--env", "prod"),
                # Prod mode insists both ports are the same: it serves everything on one.
                *("--frontend-port", str(port), "--backend-port", str(port)),
                *("--backend-host", "127.0.0.1"),
            ],
            cwd=PROJECT_ROOT,
            env=_server_env(tmp, e2e_database_url, mock_agent.url, base_url),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (_answers(f"{base_url}/ping") and _answers(f"{base_url}/")):
            if proc.poll() is not None:
                pytest.fail(
                    f"the app exited ({proc.returncode}) before answering; its log:\n"
                    + _tail(log_path),
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the app did not answer on {base_url} within {START_TIMEOUT_S:.0f} s; "
                    "its log:\n" + _tail(log_path),
                    pytrace=False,
                )
            time.sleep(0.5)
        yield base_url
    finally:
        _stop(proc)
        shutil.rmtree(tmp / "web", ignore_errors=True)  # the build (~150 MB); the log stays


@pytest.fixture(scope="session")
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
