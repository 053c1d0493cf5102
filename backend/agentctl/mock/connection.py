"""Connection-level faults for the mock agent: drop a connection, or hold it silently.

``accept_then_fail`` must make the backend see a transport error *after* the prompt was
accepted, with no HTTP answer at all. Raising from an ASGI app does not do that (uvicorn then
sends a 500), so the app remembers uvicorn's own ``send`` in the scope (``RAW_SEND_KEY``) and
``DropConnection`` reaches the connection's transport through it and aborts it (TCP reset).
This relies on uvicorn's ``send`` being a bound method of its request cycle that has a
``transport``; where that is not so, ``DropConnection`` falls back to a 503, which the client
also reports as an ambiguous transport error.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

logger = logging.getLogger(__name__)

RAW_SEND_KEY = "kandev.raw_send"
#: Longest the ``timeout`` failpoint holds a request whose client never gives up.
HOLD_CAP_S = 3600.0
_DISCONNECT_GRACE_S = 5.0


class DropConnection(Response):
    """A 'response' that aborts the TCP connection without sending a byte."""

    def __init__(self) -> None:
        super().__init__(status_code=503)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        transport = _transport_of(scope)
        if transport is None:
            logger.warning("cannot reach the connection to drop it; answering 503 instead")
            fallback = JSONResponse({"error": "accept_then_fail"}, status_code=503)
            await fallback(scope, receive, send)
            return
        transport.abort()
        # Let the server notice the loss before the app returns, so it neither writes to the
        # dead connection nor complains that no response was started.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_DISCONNECT_GRACE_S):
                await _until_disconnected(receive)


async def hold_until_disconnected(request: Request, cap_s: float = HOLD_CAP_S) -> None:
    """Keep a request open without answering until its client gives up (or ``cap_s``).

    Awaiting ``receive`` parks only this request's task: other requests go on being served.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(cap_s):
            await _until_disconnected(request.receive)


async def _until_disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _transport_of(scope: Scope) -> Any:
    send = scope.get(RAW_SEND_KEY)
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    return transport if callable(getattr(transport, "abort", None)) else None
