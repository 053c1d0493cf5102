"""Several workers on one PostgreSQL database with the NATS bus: real ``backend.serve``
processes, each on its own port (``KANDEV_NATS_URL`` set), as ``KANDEV_WORKERS=N`` runs them
behind one port. Each worker's agents call that worker back (its own public URL), so the
worker that receives an agent's question holds its waiter; a test picks which worker gets
each request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import websockets.asyncio.client
from websockets.asyncio.client import ClientConnection

from tests.support.processes import BackendProcess, eventually


@dataclass
class Worker:
    process: BackendProcess
    http: httpx.AsyncClient

    async def bundles(self, session_id: str) -> list[dict]:
        response = await self.http.get(f"/api/v1/task-sessions/{session_id}/clarifications")
        assert response.status_code == 200, response.text
        return response.json()["bundles"]

    async def permit(self, bundle: dict, option: int = 0) -> httpx.Response:
        option_id = bundle["questions"][0]["options"][option]["id"]
        return await self.http.post(
            f"/api/v1/permission/{bundle['pending_id']}/respond", json={"option_id": option_id}
        )

    async def respond(self, bundle: dict, option: int = 0) -> httpx.Response:
        answers = [
            {"message_id": q["message_id"], "option_ids": [q["options"][option]["id"]]}
            for q in bundle["questions"]
        ]
        return await self.http.post(
            f"/api/v1/clarification/{bundle['pending_id']}/respond", json={"answers": answers}
        )

    async def agent_replies(self, session_id: str) -> list[str]:
        response = await self.http.get(f"/api/v1/task-sessions/{session_id}/messages")
        return [
            m["content"]
            for m in response.json()["messages"]
            if m["author"] == "agent" and m["type"] == "message"
        ]

    async def start_session(self, task_id: str, prompt: str) -> str:
        response = await self.http.post(
            f"/api/v1/tasks/{task_id}/task-sessions", json={"prompt": prompt}
        )
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    @asynccontextmanager
    async def events(self) -> AsyncIterator[ClientConnection]:
        """A WebSocket client of this worker's event stream."""
        url = self.process.url.replace("http://", "ws://") + "/api/v1/events"
        async with websockets.asyncio.client.connect(url, open_timeout=10) as socket:
            yield socket

    async def session_state(self, task_id: str, session_id: str) -> str:
        response = await self.http.get(f"/api/v1/tasks/{task_id}/task-sessions")
        (session,) = [s for s in response.json()["sessions"] if s["id"] == session_id]
        return str(session["state"])


async def heard(
    socket: ClientConnection,
    event_type: str,
    session_id: str,
    matches: Callable[[dict], bool],
    within_s: float = 20,
) -> dict:
    """The first ``event_type`` frame about ``session_id`` whose message ``matches``."""

    async def first() -> dict:
        while True:
            frame = json.loads(await socket.recv())
            data = frame["data"]
            if (
                frame["type"] == event_type
                and data.get("session_id") == session_id
                and matches(data["message"])
            ):
                return frame

    return await asyncio.wait_for(first(), within_s)


class Workers:
    def __init__(self, tmp_path: Path, database_url: str, nats_url: str) -> None:
        self.tmp_path = tmp_path
        self.database_url = database_url
        self.nats_url = nats_url
        self.record = tmp_path / "prompts.jsonl"
        self.running: list[Worker] = []

    async def start(self, **env: str) -> Worker:
        process = BackendProcess(
            self.tmp_path, self.database_url, self.record, KANDEV_NATS_URL=self.nats_url, **env
        )
        await process.start()
        worker = Worker(process, httpx.AsyncClient(base_url=process.url, timeout=30))
        self.running.append(worker)
        return worker

    async def close(self) -> None:
        for worker in self.running:
            await worker.http.aclose()
            await worker.process.stop()

    def prompts(self, session_id: str) -> list[dict]:
        """What the mock agents of every worker recorded for ``session_id``."""
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return [p for p in map(json.loads, lines) if p["session_id"] == session_id]


@pytest.fixture
async def workers(
    tmp_path: Path, database_url: str, engine, nats_url: str
) -> AsyncIterator[Workers]:
    """Start workers with ``await workers.start()``; all are stopped after the test."""
    if engine.dialect.name != "postgresql":
        pytest.skip("several workers serve PostgreSQL only")
    started = Workers(tmp_path, database_url, nats_url)
    try:
        yield started
    finally:
        await started.close()


async def live_question(worker: Worker, task_id: str, script: str) -> tuple[str, dict]:
    """A session started on ``worker`` whose agent waits on its question there."""
    session = await worker.start_session(task_id, script + "\n/wait 600")
    (bundle,) = await eventually(
        lambda: worker.bundles(session),
        lambda b: len(b) == 1 and b[0]["state"] == "active_live",  # its waiter is registered
        within_s=20,
    )
    return session, bundle


async def detached_question(
    worker: Worker, observer: Worker, task_id: str, question: str
) -> tuple[str, dict]:
    """A session started on ``worker`` whose agent stopped waiting for its question at once
    (the agent process lives on), as ``observer`` lists it."""
    session = await worker.start_session(task_id, question + "\n/disconnect")
    (bundle,) = await eventually(
        lambda: observer.bundles(session),
        lambda b: len(b) == 1 and b[0]["state"] == "active_detached",
        within_s=20,
    )
    return session, bundle


async def answered_as_detached(
    workers: Workers, worker: Worker, session_id: str, reply: str
) -> None:
    """The session's one question, whose worker died, is answered on ``worker`` as a detached
    one: the answer resumes the agent (started again there) exactly once."""
    (seen,) = await eventually(
        lambda: worker.bundles(session_id),
        lambda b: len(b) == 1 and b[0]["state"] == "active_detached",
        within_s=20,
    )
    response = await worker.respond(seen)
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "resumed"
    await eventually(lambda: worker.agent_replies(session_id), lambda r: r == [reply], within_s=30)
    assert len(workers.prompts(session_id)) == 2  # the question's prompt, then one resume
