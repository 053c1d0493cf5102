"""Real processes for tests: free ports, bounded polling, and the backend as a process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import httpx

from backend.config import PROJECT_ROOT

T = TypeVar("T")

START_DEADLINE_S = 20.0


def free_port() -> int:
    """A port nobody listens on right now (tiny race accepted: the child binds it at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def alive(pid: int) -> bool:
    """Running, not merely a zombie nobody has reaped yet."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def eventually(
    probe: Callable[[], Awaitable[T] | T],
    check: Callable[[T], bool] = bool,
    *,
    within_s: float = 10.0,
    interval: float = 0.05,
) -> T:
    """Poll ``probe`` until ``check`` holds for its value (by default: truthy), or fail after
    ``within_s`` seconds with the last value: bounded waiting instead of fixed sleeps."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        result = probe()
        if asyncio.iscoroutine(result):
            result = await result
        if check(result):  # type: ignore[arg-type]
            return result  # type: ignore[return-value]
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {within_s}s; last value: {result!r}")
        await asyncio.sleep(interval)


class ServiceProcess:
    """A child HTTP service in its own process group, output in a log file; ``kill`` is a
    SIGKILL of the whole group (a crash), ``stop`` a graceful SIGTERM."""

    name = "service"

    def __init__(self, log_dir: Path, *, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"{self.name}-{self.port}.log"
        self._env = {**os.environ, **(env or {})}
        self._proc: asyncio.subprocess.Process | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    async def healthy(self, client: httpx.AsyncClient) -> bool:
        raise NotImplementedError

    async def start(self) -> None:
        with self.log_path.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                *self.command(),
                cwd=PROJECT_ROOT,
                env=self._env,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as client:

            async def ready() -> bool:
                if self._proc is not None and self._proc.returncode is not None:
                    raise AssertionError(f"{self.name} exited:\n{self.log()}")
                try:
                    return await self.healthy(client)
                except httpx.HTTPError:
                    return False

            await eventually(ready, within_s=START_DEADLINE_S, interval=0.05)

    @property
    def pid(self) -> int:
        """The service's process id (also its process group's)."""
        assert self._proc is not None
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    async def exited(self) -> int:
        """Wait for the process to end by itself (e.g. a ``crash`` fault point)."""
        assert self._proc is not None
        async with asyncio.timeout(START_DEADLINE_S):
            code = await self._proc.wait()
        self._proc = None
        return code

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def kill(self) -> None:
        """SIGKILL the whole process group: no shutdown code runs (a crash)."""
        await self._signal(signal.SIGKILL)

    async def stop(self) -> None:
        await self._signal(signal.SIGTERM, grace_s=10.0)

    async def _signal(self, signum: int, grace_s: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signum)
        try:
            async with asyncio.timeout(grace_s):
                await proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


class BackendProcess(ServiceProcess):
    """``python -m backend.serve`` (the API without the UI) on a given database; it runs the
    ACP mock agent per session, which records its prompts at ``agent_record``."""

    name = "backend"

    def __init__(self, log_dir: Path, database_url: str, agent_record: Path, **env: str) -> None:
        super().__init__(
            log_dir,
            env={
                "KANDEV_DATABASE_URL": database_url,
                "KANDEV_MOCK_RECORD": str(agent_record),
                "KANDEV_TEST_API": "1",
                "KANDEV_AGENTCTL_ACK_TIMEOUT_S": "3",
                **env,
            },
        )
        self._env["KANDEV_PUBLIC_URL"] = self.url

    def command(self) -> list[str]:
        return [sys.executable, "-m", "backend.serve", "--port", str(self.port)]

    async def healthy(self, client: httpx.AsyncClient) -> bool:
        return (await client.get("/api/v1/health")).status_code == 200
