"""Kandev's MCP server for agents (streamable HTTP, mounted at ``/api/v1/mcp``): the
``ask_user_clarification`` tool.

The tool call *is* the live waiter, exactly like the agent protocol's clarification long-poll
(docs/agent-protocol.md): it returns the user's answer, their Skip, or — when its wait ends or
the call is cancelled — ``detached``: the bundle stays answerable and the answer arrives as
the agent's next prompt. Each request carries the session's agent credential
(``backend/agent_credentials.py``), which names the session; the question joins that
session's current, open turn (an executor runs one prompt per session at a time, so the open
turn is the one the asking agent runs). A wrong or missing credential gets 401 before MCP
sees the request.

The runtime owns it (:meth:`start` / :meth:`stop`), so the transport's task group lives in one
task of the serving loop whichever way the app is served.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.access import bearer_token
from backend.agent_credentials import AgentCredentials
from backend.clarifications.store import Question
from backend.db.engine import read_tx
from backend.errors import DomainError
from backend.orchestrator.admission import current_open_turn
from backend.orchestrator.service import Orchestrator

log = logging.getLogger(__name__)

MCP_PATH = "/api/v1/mcp"
TOOL_NAME = "ask_user_clarification"
#: Without ``wait_seconds`` the tool holds the call this long before detaching.
DEFAULT_WAIT_S = 600.0
DETACHED_HINT = (
    "No answer yet. The question stays open for the user; their answer will arrive as your "
    "next prompt. End this turn now."
)

Label = Annotated[str, Field(min_length=1, max_length=200)]


class AskedQuestion(BaseModel):
    """One question of a bundle, with the options the user may pick from."""

    model_config = ConfigDict(extra="forbid")

    question: Annotated[str, Field(min_length=1, max_length=2000)]
    options: Annotated[list[Label], Field(max_length=20)] = []
    #: The user may pick several options (otherwise at most one).
    multi_select: bool = False


class AgentTools:
    """The MCP server, its credential gate, and the lifetime of its transport."""

    def __init__(
        self, engine: AsyncEngine, orchestrator: Orchestrator, credentials: AgentCredentials
    ) -> None:
        self.engine = engine
        self.orchestrator = orchestrator
        self.credentials = credentials
        self.server: MCPServer[Any] = MCPServer(
            "kandev",
            instructions=(
                "Ask the user with ask_user_clarification when you need a decision you cannot "
                "make alone; one call may hold several questions, each with options."
            ),
        )
        self.server.tool(name=TOOL_NAME)(self._tool())
        app = self.server.streamable_http_app(streamable_http_path="/", stateless_http=True)
        self.asgi_app: ASGIApp = _RequireSessionCredential(app, credentials)
        self._stop = asyncio.Event()
        self._serving: asyncio.Task[None] | None = None

    def _tool(self) -> Any:
        async def ask_user_clarification(
            questions: Annotated[list[AskedQuestion], Field(min_length=1, max_length=10)],
            ctx: Context,
            wait_seconds: Annotated[float, Field(ge=0, le=3600)] = DEFAULT_WAIT_S,
        ) -> dict[str, Any]:
            """Ask the user one or more questions and wait for the answer. ``outcome`` is
            ``answered`` (with ``answers``), ``rejected`` (the user skipped), ``detached`` (no
            answer yet: end your turn; the answer comes as your next prompt), or
            ``cancelled`` / ``expired`` (stop)."""
            session_id = self.credentials.session_of(_bearer(ctx.headers or {}))
            return await self.ask(session_id, questions, wait_seconds)

        return ask_user_clarification

    async def ask(
        self, session_id: str, questions: list[AskedQuestion], wait_seconds: float
    ) -> dict[str, Any]:
        """One tool call: the question joins the session's open turn and waits there. A
        refusal (no open turn, a terminal session) is a tool error the agent reads."""
        async with read_tx(self.engine) as conn:
            turn = await current_open_turn(conn, session_id)
        if turn is None:
            raise ValueError("this session has no open turn to ask in")
        try:
            result = await self.orchestrator.agent_clarification(
                turn.session_id,
                turn.turn_id,
                turn.prompt_generation,
                [Question(q.question, tuple(q.options), q.multi_select) for q in questions],
                wait_seconds,
                asyncio.get_running_loop().create_future(),  # a cancelled call: agent gone
            )
        except DomainError as error:
            raise ValueError(error.message) from error
        reply: dict[str, Any] = {"outcome": result.outcome, "pending_id": result.pending_id}
        if result.outcome == "answered":
            reply["answers"] = result.answers
        elif result.outcome == "detached":
            reply["message"] = DETACHED_HINT
        return reply

    async def start(self) -> None:
        """Run the transport's task group in a task of its own until :meth:`stop` (once per
        runtime: the SDK's session manager cannot run twice)."""
        if self._serving is not None or self._stop.is_set():
            raise RuntimeError("the agent tool server runs once per runtime")
        running = asyncio.Event()

        async def serve() -> None:
            async with self.server.session_manager.run():
                running.set()
                await self._stop.wait()

        self._serving = asyncio.create_task(serve(), name="kandev-mcp")
        started = asyncio.ensure_future(running.wait())
        await asyncio.wait({self._serving, started}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if self._serving.done():
            self._serving.result()  # it failed to start: say why

    async def stop(self) -> None:
        if self._serving is not None:
            self._stop.set()
            await self._serving
            self._serving = None


def _bearer(headers: Any) -> str | None:
    return bearer_token(headers.get("authorization"))


class _RequireSessionCredential:
    """401 unless ``Authorization: Bearer <credential>`` is some session's credential."""

    def __init__(self, app: ASGIApp, credentials: AgentCredentials) -> None:
        self.app = app
        self.credentials = credentials

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            try:
                self.credentials.session_of(_bearer(headers))
            except DomainError as error:
                body = {"error": error.code, "message": error.message}
                await JSONResponse(body, status_code=error.status)(scope, receive, send)
                return
        await self.app(scope, receive, send)
