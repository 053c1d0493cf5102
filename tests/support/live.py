"""Real processes for API tests: the API served over HTTP in the test's event loop, with the
ACP executor running the project's ACP mock agent as a real process per session (it asks
through Kandev's MCP endpoint exactly as a coding agent would)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import uvicorn
import websockets.asyncio.client
from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.agents.acp_executor import AcpExecutor
from backend.agents.profiles import load_profiles
from backend.api.app import create_api
from backend.config import Settings
from backend.events import Event
from backend.orchestrator.dispatch import PromptDispatcher
from backend.runtime import Runtime
from tests.support.processes import free_port

T = TypeVar("T")
#: How long the ``timeout`` agent fault withholds an acknowledgement in API tests.
FAULT_TIMEOUT_S = 1.0


async def failpoint_hits(name: str) -> int:
    """How often the in-process fault point ``name`` was reached (0 once cleared)."""
    point = failpoints.listing().get(name)
    return int(point["hits"]) if point else 0


class LiveApi:
    def __init__(self, runtime: Runtime, url: str, client: httpx.AsyncClient) -> None:
        self.runtime = runtime
        self.url = url
        self.http = client
        self.events: list[Event] = []

    @property
    def executor(self) -> AcpExecutor:
        control = self.runtime.agent_control
        assert control is not None, "this API runs no ACP executor"
        return control

    async def as_agent(self, session_id: str, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST ``/api/v1/_agent/sessions/{session_id}/{path}`` with the session's credential:
        the callback protocol of an out-of-process executor."""
        token = self.runtime.credentials.token_for(session_id)
        return await self.http.post(
            f"/api/v1/_agent/sessions/{session_id}/{path}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )

    async def agent_says(
        self, session_id: str, turn_id: str, generation: int, content: str
    ) -> dict[str, Any]:
        """Agent output for a turn, delivered as the ACP executor delivers it (raises
        ``TurnNotCurrent`` when that turn no longer owns the session)."""
        return await self.runtime.orchestrator.agent_message(
            session_id, turn_id, generation, content
        )

    async def agent_ready(
        self, session_id: str, turn_id: str, generation: int, status: str = "completed"
    ) -> bool:
        """The agent's end of a turn (its prompt's stop reason), as the executor reports it;
        ``True`` when it applied."""
        return await self.runtime.orchestrator.turn_complete(
            session_id, turn_id, generation, status
        )

    async def dispatched(self, session_id: str) -> list[dict[str, Any]]:
        """Prompts the mock agent durably recorded for ``session_id``."""
        return [p for p in await self.executor.prompts() if p["session_id"] == session_id]

    async def agent_fault(self, action: str | None, count: int | None = None) -> None:
        """Arm (or clear) the agent fault at the executor's dispatch boundary."""
        if action is None:
            await self.executor.clear_failpoint()
        else:
            await self.executor.set_failpoint(action, count)

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
    record: Path,
    ack_timeout_s: float = 20.0,
    watchdog_s: float = 1.0,
    dispatcher: PromptDispatcher | None = None,
    profiles_file: str | None = None,
) -> AsyncIterator[LiveApi]:
    """The API on a free port over ``engine``. Prompts go to the runtime's ACP executor (the
    mock agent records them at ``record``), or to ``dispatcher`` when given.

    The acknowledgement bound is generous because a session's first prompt launches its agent
    process (a loaded CI machine starts Python slowly); the ``timeout`` agent fault withholds
    the acknowledgement for :data:`FAULT_TIMEOUT_S` only."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    settings = Settings(
        public_url=url,
        agentctl_ack_timeout_s=ack_timeout_s,
        test_api=True,
        primary_answer_watchdog_s=watchdog_s,
        mock_record=str(record),
        agent_profiles=profiles_file,
    )
    if dispatcher is None:
        dispatcher = AcpExecutor(
            load_profiles(profiles_file, mock_record=str(record)),
            start_timeout_s=ack_timeout_s * 0.75,
            fault_timeout_s=FAULT_TIMEOUT_S,
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
        api = LiveApi(runtime, url, client)
        collector = asyncio.create_task(_collect(queue, api.events))
        try:
            yield api
        finally:
            collector.cancel()
            server.should_exit = True
            await serving
            await runtime.stop()
            if isinstance(dispatcher, AcpExecutor):
                await dispatcher.aclose()


async def _collect(queue: asyncio.Queue[Event], into: list[Any]) -> None:
    while True:
        into.append(await queue.get())
