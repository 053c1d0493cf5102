"""Test harness: the real mock agent as a child process, and a tiny fake backend in-process.

The fake backend records every callback and lets a test answer the clarification long-poll
(answered / rejected / detached) or refuse a session's callbacks with 409 (superseded).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from backend.agentctl import AgentctlClient, PromptRequest
from backend.config import PROJECT_ROOT

T = TypeVar("T")

START_DEADLINE_S = 20.0
#: The mock's default clarification wait in these tests (``KANDEV_CLARIFICATION_WAIT_S``).
DEFAULT_WAIT_S = 7
ACK_TIMEOUT_S = 2.0


def free_port() -> int:
    """A port nobody listens on right now (tiny race accepted: the child binds it at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def eventually(
    probe: Callable[[], Awaitable[T] | T], *, within_s: float = 10.0, interval: float = 0.02
) -> T:
    """Poll ``probe`` until it returns something truthy, or fail after ``within_s`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while True:
        result = probe()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result  # type: ignore[return-value]
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {within_s}s")
        await asyncio.sleep(interval)


class MockAgentProcess:
    """``python -m backend.agentctl.mock`` in its own process group, output in a log file."""

    def __init__(self, state_dir: Path, *, env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = state_dir.parent / f"{state_dir.name}-{self.port}.log"
        self._env = {**os.environ, **(env or {})}
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log_path.open("ab") as log:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "backend.agentctl.mock",
                "--port",
                str(self.port),
                "--state-dir",
                str(self.state_dir),
                cwd=PROJECT_ROOT,
                env=self._env,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        async with AgentctlClient(self.url) as client:

            async def ready() -> bool:
                if self._proc is not None and self._proc.returncode is not None:
                    raise AssertionError(f"mock agent exited:\n{self.log()}")
                return await client.health()

            await eventually(ready, within_s=START_DEADLINE_S, interval=0.05)

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


@dataclass
class Callback:
    kind: str  # "message" | "clarification" | "complete"
    session_id: str
    body: dict[str, Any]
    turn_id: str | None = None
    status_code: int = 200


@dataclass
class FakeBackend:
    """Records the agent's callbacks; tests decide how clarifications end."""

    url: str = ""
    callbacks: list[Callback] = field(default_factory=list)
    superseded: set[str] = field(default_factory=set)
    _waiters: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)

    def of(self, session_id: str, kind: str | None = None) -> list[Callback]:
        return [
            c
            for c in self.callbacks
            if c.session_id == session_id and (kind is None or c.kind == kind)
        ]

    def messages(self, session_id: str) -> list[str]:
        return [c.body["content"] for c in self.of(session_id, "message") if c.status_code == 201]

    def completion(self, session_id: str) -> Callback | None:
        done = self.of(session_id, "complete")
        return done[0] if done else None

    async def resolve(self, session_id: str, outcome: str, **extra: Any) -> None:
        """Answer the session's open long-poll once it is open (``answered`` etc.)."""
        waiter = await eventually(lambda: self._waiters.get(session_id))
        waiter.set_result({"outcome": outcome, "pending_id": f"p-{session_id}", **extra})

    def app(self) -> FastAPI:
        app = FastAPI()
        base = "/api/v1/_agent/sessions/{session_id}"

        def refused(kind: str, session_id: str, body: dict[str, Any]) -> JSONResponse | None:
            if session_id not in self.superseded:
                return None
            self.callbacks.append(Callback(kind, session_id, body, status_code=409))
            return JSONResponse({"error": "turn_not_current"}, status_code=409)

        @app.post(base + "/messages")
        async def message(session_id: str, request: Request) -> JSONResponse:
            body = await request.json()
            if (refusal := refused("message", session_id, body)) is not None:
                return refusal
            self.callbacks.append(Callback("message", session_id, body, status_code=201))
            return JSONResponse({"message_id": uuid.uuid4().hex}, status_code=201)

        @app.post(base + "/clarifications")
        async def clarification(session_id: str, request: Request) -> JSONResponse:
            body = await request.json()
            if (refusal := refused("clarification", session_id, body)) is not None:
                return refusal
            self.callbacks.append(Callback("clarification", session_id, body))
            detached = {"outcome": "detached", "pending_id": f"p-{session_id}"}
            if body["wait_seconds"] == 0:
                return JSONResponse(detached)
            waiter = asyncio.get_running_loop().create_future()
            self._waiters[session_id] = waiter
            try:
                async with asyncio.timeout(body["wait_seconds"]):
                    return JSONResponse(await waiter)
            except TimeoutError:
                return JSONResponse(detached)
            finally:
                self._waiters.pop(session_id, None)

        @app.post(base + "/turns/{turn_id}/complete")
        async def complete(session_id: str, turn_id: str, request: Request) -> JSONResponse:
            body = await request.json()
            if (refusal := refused("complete", session_id, body)) is not None:
                return refusal
            self.callbacks.append(Callback("complete", session_id, body, turn_id=turn_id))
            return JSONResponse({})

        return app


@contextlib.asynccontextmanager
async def serve_fake_backend() -> Any:
    """Serve a ``FakeBackend`` with uvicorn on a free port inside the running event loop."""
    backend = FakeBackend()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    backend.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        backend.app(), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await eventually(lambda: server.started or task.done())
        if task.done():
            task.result()
        yield backend
    finally:
        server.should_exit = True
        await task
        sock.close()


def make_prompt(
    backend: FakeBackend,
    session_id: str,
    content: str,
    *,
    turn: str = "t1",
    generation: int = 1,
    answer: dict[str, Any] | None = None,
) -> PromptRequest:
    return PromptRequest(
        session_id=session_id,
        turn_id=f"{session_id}-{turn}",
        prompt_generation=generation,
        content=content,
        callback_url=backend.url,
        answer=answer,
    )
