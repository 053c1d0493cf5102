"""Request-scoped dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from backend.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    runtime.revisions  # noqa: B018 - raises 503 "starting" until start-up has finished
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def client_gone(request: Request) -> None:
    """Returns when the HTTP client disconnects (used by long-polls)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
