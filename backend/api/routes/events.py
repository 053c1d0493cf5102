"""``GET (WebSocket) /api/v1/events``: every event about tasks the caller can see.

Frames are ``{"type", "data"}`` as published on the bus, in bus order, with no subscription
message. The socket also answers one request form, the task-session list of the REST route
(``{"type": "task_sessions.list", "request_id", "task_id"}``), with
``task_sessions.list.result`` or an ``error`` frame: like REST, a failed authoritative
projection is an ``internal`` error, never a clean-looking list (S44).

Authentication is the bearer header or ``?token=``; a bad token closes the socket with 4401
before it is accepted. A client that reads so slowly that its queue of undelivered events
overflows (``backend.events.bus.QUEUE_LIMIT``) is closed with 4429: reconnect and reload
(its memory stays bounded; what it missed is what a reload shows). What a caller may see is
:class:`backend.services.events.EventVisibility`'s to decide; the list is
:func:`backend.services.sessions.task_session_list`, as over REST.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect

from backend.access import Caller, Unauthorized, bearer_token, resolve_caller
from backend.db.engine import read_tx
from backend.errors import DomainError
from backend.events import Event
from backend.events.bus import OVERFLOW
from backend.runtime import Runtime
from backend.services.events import EventVisibility
from backend.services.sessions import task_session_list

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1")

#: Close code for a refused token (4000-4999 are application codes).
CLOSE_UNAUTHORIZED = 4401
CLOSE_NOT_READY = 4503
#: Close code for a client too slow to keep up: reconnect, then reload what it shows.
CLOSE_TOO_SLOW = 4429


@router.websocket("/events")
async def events(websocket: WebSocket, token: str | None = None) -> None:
    runtime: Runtime = websocket.app.state.runtime
    if not runtime.ready:
        await websocket.close(code=CLOSE_NOT_READY, reason="starting")
        return
    try:
        raw = bearer_token(websocket.headers.get("authorization"), token)
        async with read_tx(runtime.engine) as conn:
            caller = await resolve_caller(conn, raw, runtime.settings.single_user)
    except Unauthorized as error:
        await websocket.close(code=CLOSE_UNAUTHORIZED, reason=error.message)
        return
    await websocket.accept()
    send_lock = asyncio.Lock()

    async def send(frame: dict[str, Any]) -> None:
        async with send_lock:
            await websocket.send_json(frame)

    visibility = EventVisibility(runtime, caller)
    async with runtime.bus.subscribe() as queue:
        forwarding = asyncio.create_task(_forward(queue, visibility, send, websocket))
        try:
            while True:
                text = await websocket.receive_text()
                try:
                    request = json.loads(text)
                except ValueError:
                    await send(_error(None, 400, "validation", "frames must be JSON objects"))
                    continue
                await send(await _answer(runtime, caller, request))
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client went away
        finally:
            forwarding.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await forwarding


async def _forward(
    queue: asyncio.Queue[Event], visibility: EventVisibility, send: Any, websocket: WebSocket
) -> None:
    while True:
        event = await queue.get()
        if event.type == OVERFLOW:
            with contextlib.suppress(Exception):
                await websocket.close(code=CLOSE_TOO_SLOW, reason="too slow: reconnect and reload")
            return
        try:
            if await visibility.allows(event):
                await send(event.to_json())
        except (WebSocketDisconnect, RuntimeError):
            return
        except Exception as error:  # a lookup failed: drop this event, keep the stream
            log.warning("event %s not forwarded: %r", event.type, error)


async def _answer(runtime: Runtime, caller: Caller, request: Any) -> dict[str, Any]:
    request_id = request.get("request_id") if isinstance(request, dict) else None
    if not isinstance(request, dict) or request.get("type") != "task_sessions.list":
        return _error(request_id, 400, "validation", "unknown request type")
    task_id = request.get("task_id")
    if not isinstance(task_id, str) or not task_id or "\x00" in task_id:
        return _error(request_id, 400, "validation", "task_id must be a non-empty string")
    try:
        sessions_json = await task_session_list(runtime, caller, task_id)
    except DomainError as error:
        return _error(request_id, error.status, error.code, error.message)
    except Exception as error:
        log.error("task_sessions.list over WebSocket failed: %r", error)
        return _error(request_id, 500, "internal", "internal server error")
    return {
        "type": "task_sessions.list.result",
        "data": {"request_id": request_id, "task_id": task_id, "sessions": sessions_json},
    }


def _error(request_id: Any, status: int, code: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "data": {"request_id": request_id, "status": status, "error": code, "message": message},
    }
