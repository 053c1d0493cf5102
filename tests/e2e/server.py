"""The app under test as a process: ``reflex run --env prod`` on one port, in its own process
group, restartable on the same port and database (the restart scenario kills it mid-flight).

Plain synchronous code: Playwright's sync API owns the test thread's event loop. Used by the
e2e fixtures and by ``benchmarks/activation.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
#: The first production build of a fresh checkout installs the frontend packages.
START_TIMEOUT_S = float(os.environ.get("KANDEV_E2E_START_TIMEOUT", "240"))


class AppDidNotStart(RuntimeError):
    """The app exited or did not answer in time; the message carries its log's tail."""


def prepare_database(url: str) -> None:
    """Migrate and seed ``url`` through the CLI the run script uses."""
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
            raise RuntimeError(f"backend.cli {command} failed:\n{result.stdout}\n{result.stderr}")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def tail(path: Path, lines: int = 120) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class AppServer:
    """One app instance: a database, a port, and a work directory whose log and mock-agent
    prompt record survive restarts (the app launches the ACP mock agent per session).

    ``web_dir`` is the Reflex build directory. Sharing it between servers of one test run means
    only the first start pays for installing the frontend packages; later starts rebuild in a
    few seconds. Starts are sequential within a run, so the shared directory is never raced.
    """

    def __init__(
        self,
        *,
        database_url: str,
        port: int,
        web_dir: Path,
        work_dir: Path,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        self.database_url = database_url
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.web_dir = web_dir
        self.work_dir = work_dir
        self.log_path = work_dir / "app.log"
        self.extra_env = extra_env or {}
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            KANDEV_MOCK_RECORD=str(self.work_dir / "agent-prompts.jsonl"),
            KANDEV_PUBLIC_URL=self.url,
            KANDEV_TEST_API="1",
            KANDEV_AGENTCTL_ACK_TIMEOUT_S="5",
            KANDEV_DATABASE_URL=self.database_url,
            REFLEX_WEB_WORKDIR=str(self.web_dir),
            REFLEX_STATES_WORKDIR=str(self.work_dir / "states"),
            REFLEX_TELEMETRY_ENABLED="false",
            REFLEX_CHECK_LATEST_VERSION="false",
        )
        # bun from scripts/bootstrap, for runs that did not go through scripts/test.
        tools_bin = PROJECT_ROOT / ".tools" / "node_modules" / ".bin"
        if (tools_bin / "bun").exists():
            env["PATH"] = f"{tools_bin}{os.pathsep}{env.get('PATH', '')}"
            env["REFLEX_USE_SYSTEM_BUN"] = "1"
        env.update(self.extra_env)
        return env

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start (or start again) and wait until both the API and the page answer."""
        if self.running:
            raise RuntimeError("the app is already running")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n===== start {self.starts} =====\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                [
                    *(sys.executable, "-m", "reflex", "run", "--env", "prod"),
                    # Prod mode insists both ports are the same: it serves everything on one.
                    *("--frontend-port", str(self.port), "--backend-port", str(self.port)),
                    *("--backend-host", "127.0.0.1"),
                ],
                cwd=PROJECT_ROOT,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (_answers(f"{self.url}/ping") and _answers(f"{self.url}/")):
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise AppDidNotStart(
                    f"the app exited ({code}) before answering; its log:\n{tail(self.log_path)}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise AppDidNotStart(
                    f"the app did not answer on {self.url} within {START_TIMEOUT_S:.0f} s; "
                    f"its log:\n{tail(self.log_path)}"
                )
            time.sleep(0.2)

    def _signal_group(self, signum: int) -> None:
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signum)

    def kill(self) -> None:
        """SIGKILL the whole group at once, as a power cut would (no shutdown hooks run)."""
        if self._proc is None:
            return
        self._signal_group(signal.SIGKILL)
        self._proc.wait(timeout=20)
        self._proc = None

    def stop(self) -> None:
        """Stop the server and everything it started (bun, granian workers): its group."""
        if self._proc is None:
            return
        self._signal_group(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=20)
        # Whatever is left of the group (a stuck leader, a stray worker) goes now.
        self._signal_group(signal.SIGKILL)
        self._proc.wait(timeout=10)
        self._proc = None

    def restart_after_crash(self) -> None:
        """Kill the group if anything of it is left (a ``crash`` fault point kills only the
        worker, which Granian then replaces), then start again on the same port and database."""
        if self._proc is not None:
            self._signal_group(signal.SIGKILL)
            self._proc.wait(timeout=20)
            self._proc = None
        self.start()

    def log_tail(self, lines: int = 200) -> str:
        return tail(self.log_path, lines)
