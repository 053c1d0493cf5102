"""Request-scoped dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from backend.access import Caller, bearer_token, resolve_caller
from backend.db.engine import read_tx
from backend.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    runtime.revisions  # noqa: B018 - raises 503 "starting" until start-up has finished
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def get_caller(request: Request, runtime: RuntimeDep) -> Caller:
    """The authenticated caller (401 for a bad token); see :mod:`backend.access`."""
    token = bearer_token(request.headers.get("authorization"))
    async with read_tx(runtime.engine) as conn:
        return await resolve_caller(conn, token, runtime.settings.single_user)


CallerDep = Annotated[Caller, Depends(get_caller)]


def require_agent(session_id: str, request: Request, runtime: RuntimeDep) -> None:
    """Agent callbacks carry the session's own credential (``backend/agent_credentials.py``):
    401 before anything is read or written."""
    runtime.credentials.check(session_id, bearer_token(request.headers.get("authorization")))


async def client_gone(request: Request) -> None:
    """Returns when the HTTP client disconnects (used by long-polls)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
