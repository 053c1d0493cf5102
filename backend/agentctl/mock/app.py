"""The mock agent's HTTP API (``docs/agent-protocol.md``): a FastAPI app over a state dir.

Order inside ``POST /v1/prompts`` is the point of the whole mock: the failpoint is consulted
first (``reject`` and ``timeout`` record nothing), then the prompt is recorded durably, then
its run starts, and only then is it acknowledged — or, under ``accept_then_fail``, the
connection is dropped instead, leaving the backend with the ambiguous case.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.types import Receive, Scope, Send

from backend.agentctl.client import PromptRequest
from backend.agentctl.mock import failpoints
from backend.agentctl.mock.connection import RAW_SEND_KEY, DropConnection, hold_until_disconnected
from backend.agentctl.mock.failpoints import FailpointSpecError, PromptFailpoint
from backend.agentctl.mock.record import PromptRecord, public_view
from backend.agentctl.mock.runner import Runner
from backend.agentctl.mock.script import DEFAULT_WAIT_S
from backend.agentctl.protocol import FAILPOINT_PATH, HEALTH_PATH, PROMPTS_PATH
from backend.clock import utcnow

logger = logging.getLogger(__name__)

WAIT_ENV_VAR = "KANDEV_CLARIFICATION_WAIT_S"


class PromptBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    session_id: str = Field(min_length=1)
    turn_id: str = Field(min_length=1)
    prompt_generation: int
    content: str
    callback_url: str = Field(min_length=1)
    agent_token: str = Field(min_length=1)
    answer: dict[str, Any] | None = None


class FailpointBody(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    action: str
    count: int | None = None


class _MockAgentAPI(FastAPI):
    """Remembers the server's own ``send`` per request so a fault can drop the connection."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[RAW_SEND_KEY] = send
        await super().__call__(scope, receive, send)


def create_mock_app(
    state_dir: Path,
    *,
    failpoint: PromptFailpoint | None = None,
    default_wait_s: float | None = None,
) -> FastAPI:
    """Build the mock agent. Omitted settings come from the environment, so the process
    and the tests configure it the same way (``KANDEV_MOCK_AGENT_FAILPOINTS``,
    ``KANDEV_CLARIFICATION_WAIT_S``); a bad setting raises ``ValueError`` at build time."""
    if failpoint is None:
        failpoint = failpoints.from_env_spec(os.environ.get(failpoints.ENV_VAR, ""))
    if default_wait_s is None:
        default_wait_s = _wait_from_env()
    record = PromptRecord(state_dir)
    http = httpx.AsyncClient()
    runner = Runner(http, default_wait_s=default_wait_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await runner.aclose()
            await http.aclose()

    app = _MockAgentAPI(title="Kandev mock agent", lifespan=lifespan, openapi_url=None)
    _install_error_handlers(app)

    @app.post(PROMPTS_PATH)
    async def accept_prompt(body: PromptBody, request: Request) -> Response:
        action = failpoint.take()
        if action == "reject":
            return JSONResponse({"error": "rejected"}, status_code=409)
        if action == "timeout":
            await hold_until_disconnected(request)
            return JSONResponse({"error": "timeout"}, status_code=503)
        entry = {**body.model_dump(), "accepted_at": utcnow().isoformat()}
        try:
            await record.append(entry)
        except OSError as exc:
            # The line may or may not be on disk: an error answer, which the client
            # reports as ambiguous, is the honest one.
            logger.error("could not record prompt %s: %s", body.turn_id, exc)
            return JSONResponse({"error": "record_failed"}, status_code=500)
        runner.start(PromptRequest(**body.model_dump()))
        if action == "accept_then_fail":
            return DropConnection()
        return JSONResponse({"accepted": True}, status_code=202)

    @app.get(PROMPTS_PATH)
    async def list_prompts() -> dict[str, list[dict[str, Any]]]:
        return {"prompts": [public_view(entry) for entry in await record.entries()]}

    @app.put(FAILPOINT_PATH, status_code=204)
    async def set_failpoint(body: FailpointBody) -> Response:
        try:
            failpoint.arm(body.action, body.count)
        except FailpointSpecError as exc:
            return JSONResponse({"error": "invalid_request", "detail": str(exc)}, 400)
        return Response(status_code=204)

    @app.delete(FAILPOINT_PATH, status_code=204)
    async def clear_failpoint() -> Response:
        failpoint.clear()
        return Response(status_code=204)

    @app.get(HEALTH_PATH)
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def _install_error_handlers(app: FastAPI) -> None:
    """400 for bad bodies (not FastAPI's 422) and a bare 500: no details or traces leak."""

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, __: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": "invalid_request"}, status_code=400)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        logger.error("%s %s failed: %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse({"error": "internal"}, status_code=500)


def _wait_from_env() -> float:
    raw = os.environ.get(WAIT_ENV_VAR, "").strip()
    if not raw:
        return DEFAULT_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{WAIT_ENV_VAR} must be a number of seconds") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{WAIT_ENV_VAR} must be a finite number >= 0")
    return value
