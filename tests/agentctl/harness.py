"""Test harness: the real mock agent as a child process, and a tiny fake backend in-process.

The fake backend records every callback and lets a test answer the clarification long-poll
(answered / rejected / detached) or refuse a session's callbacks with 409 (superseded).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from backend.agentctl import PromptRequest
from tests.support.processes import ServiceProcess, eventually

T = TypeVar("T")

#: The mock's default clarification wait in these tests (``KANDEV_CLARIFICATION_WAIT_S``).
DEFAULT_WAIT_S = 7
ACK_TIMEOUT_S = 2.0


@dataclass
class Callback:
    kind: str  # "message" | "clarification" | "complete"
    session_id: str
    body: dict[str, Any]
    turn_id: str | None = None
    status_code: int = 200


def token_of(session_id: str) -> str:
    """The credential the fake backend expects from the agent of ``session_id``."""
    return f"credential-of-{session_id}"


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

        def refused(
            kind: str, session_id: str, body: dict[str, Any], request: Request
        ) -> JSONResponse | None:
            if request.headers.get("authorization") != f"Bearer {token_of(session_id)}":
                self.callbacks.append(Callback(kind, session_id, body, status_code=401))
                return JSONResponse({"error": "unauthorized"}, status_code=401)
            if session_id not in self.superseded:
                return None
            self.callbacks.append(Callback(kind, session_id, body, status_code=409))
            return JSONResponse({"error": "turn_not_current"}, status_code=409)

        @app.post(base + "/messages")
        async def message(session_id: str, request: Request) -> JSONResponse:
            body = await request.json()
            if (refusal := refused("message", session_id, body, request)) is not None:
                return refusal
            self.callbacks.append(Callback("message", session_id, body, status_code=201))
            return JSONResponse({"message_id": uuid.uuid4().hex}, status_code=201)

        @app.post(base + "/clarifications")
        async def clarification(session_id: str, request: Request) -> JSONResponse:
            body = await request.json()
            if (refusal := refused("clarification", session_id, body, request)) is not None:
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
            if (refusal := refused("complete", session_id, body, request)) is not None:
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
        agent_token=token_of(session_id),
        answer=answer,
    )


class MockAgentProcess(ServiceProcess):
    """``python -m backend.agentctl.mock`` (the HTTP mock agent of the agentctl protocol) with
    its durable record in ``state_dir``."""

    name = "mock-agent"

    def __init__(self, state_dir: Path, *, env: dict[str, str] | None = None) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = state_dir
        super().__init__(state_dir.parent, env=env)

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "backend.agentctl.mock",
            "--port",
            str(self.port),
            "--state-dir",
            str(self.state_dir),
        ]

    async def healthy(self, client: httpx.AsyncClient) -> bool:
        return (await client.get("/v1/health")).status_code == 200
