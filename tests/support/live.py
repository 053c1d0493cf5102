"""Real processes for API tests: the mock agent (a separate process) and the API served over
HTTP in the test's event loop, so the agent can call back exactly as it would in production."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx
import uvicorn
import websockets.asyncio.client
from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.api.app import create_api
from backend.config import Settings
from backend.events import Event
from backend.orchestrator.dispatch import PromptDispatcher
from backend.runtime import Runtime
from tests.support.processes import free_port

T = TypeVar("T")


async def failpoint_hits(name: str) -> int:
    """How often the in-process fault point ``name`` was reached (0 once cleared)."""
    point = failpoints.listing().get(name)
    return int(point["hits"]) if point else 0


class LiveApi:
    def __init__(
        self, runtime: Runtime, url: str, client: httpx.AsyncClient, agent_url: str
    ) -> None:
        self.runtime = runtime
        self.url = url
        self.http = client
        self.agent_url = agent_url
        self.events: list[Event] = []

    async def as_agent(self, session_id: str, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST ``/api/v1/_agent/sessions/{session_id}/{path}`` as the session's own agent
        (with its credential), the way the mock agent calls back."""
        token = self.runtime.credentials.token_for(session_id)
        return await self.http.post(
            f"/api/v1/_agent/sessions/{session_id}/{path}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )

    async def dispatched(self, session_id: str) -> list[dict[str, Any]]:
        """Prompts the mock agent durably accepted for ``session_id``."""
        async with httpx.AsyncClient(base_url=self.agent_url, timeout=10) as agent:
            prompts = (await agent.get("/v1/prompts")).json()["prompts"]
        return [p for p in prompts if p["session_id"] == session_id]

    async def agent_fault(self, action: str | None, count: int | None = None) -> None:
        async with httpx.AsyncClient(base_url=self.agent_url, timeout=10) as agent:
            if action is None:
                await agent.delete("/v1/failpoints/agentctl.prompt")
            else:
                body: dict[str, Any] = {"action": action}
                if count is not None:
                    body["count"] = count
                (await agent.put("/v1/failpoints/agentctl.prompt", json=body)).raise_for_status()

    def websocket(self, bearer: str | None = None, **params: str) -> Any:
        """A WebSocket client on ``/api/v1/events`` (an async context manager)."""
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else None
        query = "&".join(f"{k}={v}" for k, v in params.items())
        url = (
            self.url.replace("http://", "ws://") + "/api/v1/events" + (f"?{query}" if query else "")
        )
        return websockets.asyncio.client.connect(url, additional_headers=headers, open_timeout=10)

    def events_of(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]


@asynccontextmanager
async def live_api(
    engine: AsyncEngine,
    agent_url: str,
    ack_timeout_s: float = 2.0,
    watchdog_s: float = 1.0,
    dispatcher: PromptDispatcher | None = None,
) -> AsyncIterator[LiveApi]:
    """The API on a free port over ``engine``; prompts go to the agentctl service at
    ``agent_url``, or to ``dispatcher`` (e.g. the ACP executor) when given."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = Settings(
        agentctl_url=agent_url,
        public_url=url,
        agentctl_ack_timeout_s=ack_timeout_s,
        test_api=True,
        primary_answer_watchdog_s=watchdog_s,
    )
    runtime = Runtime(engine, settings, dispatcher=dispatcher)
    await runtime.start()
    server = uvicorn.Server(
        uvicorn.Config(
            create_api(runtime),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
            # An agent long-poll left open by a failing test must not hang the teardown.
            timeout_graceful_shutdown=5,
        )
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
        await asyncio.sleep(0.01)
    async with (
        runtime.bus.subscribe() as queue,
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        api = LiveApi(runtime, url, client, agent_url)
        collector = asyncio.create_task(_collect(queue, api.events))
        try:
            yield api
        finally:
            collector.cancel()
            server.should_exit = True
            await serving
            await runtime.stop()


async def _collect(queue: asyncio.Queue[Event], into: list[Any]) -> None:
    while True:
        into.append(await queue.get())
