"""``GET (WebSocket) /api/v1/events``: every event about tasks the caller can see.

Frames are ``{"type", "data"}`` as published on the bus, in bus order, with no subscription
message. The socket also answers one request form, the task-session list of the REST route
(``{"type": "task_sessions.list", "request_id", "task_id"}``), with
``task_sessions.list.result`` or an ``error`` frame: like REST, a failed authoritative
projection is an ``internal`` error, never a clean-looking list (S44).

Authentication is the bearer header or ``?token=``; a bad token closes the socket with 4401
before it is accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from sqlalchemy import select

from backend.access import Caller, Unauthorized, bearer_token, resolve_caller
from backend.api.routes.sessions import task_session_list
from backend.authority.sql import sessions, tasks
from backend.db.engine import read_tx
from backend.errors import DomainError
from backend.events import Event
from backend.runtime import Runtime

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1")

#: Close code for a refused token (4000-4999 are application codes).
CLOSE_UNAUTHORIZED = 4401
CLOSE_NOT_READY = 4503


class _Visibility:
    """Which workspace each task belongs to (it never changes), cached per connection."""

    def __init__(self, runtime: Runtime, caller: Caller) -> None:
        self.runtime = runtime
        self.caller = caller
        self._workspace_of_task: dict[str, str | None] = {}
        self._task_of_session: dict[str, str | None] = {}

    async def allows(self, event: Event) -> bool:
        if self.caller.workspace_ids is None:
            return True
        task_id = event.data.get("task_id") or await self._task_of(event.data.get("session_id"))
        workspace_id = event.data.get("workspace_id") or await self._workspace_of(task_id)
        return workspace_id is not None and self.caller.sees_workspace(str(workspace_id))

    async def _task_of(self, session_id: Any) -> str | None:
        if not session_id:
            return None
        if session_id not in self._task_of_session:
            async with read_tx(self.runtime.engine) as conn:
                row = (
                    await conn.execute(
                        select(sessions.c.task_id).where(sessions.c.id == str(session_id))
                    )
                ).first()
            self._task_of_session[session_id] = row.task_id if row else None
        return self._task_of_session[session_id]

    async def _workspace_of(self, task_id: Any) -> str | None:
        if not task_id:
            return None
        if task_id not in self._workspace_of_task:
            async with read_tx(self.runtime.engine) as conn:
                row = (
                    await conn.execute(
                        select(tasks.c.workspace_id).where(tasks.c.id == str(task_id))
                    )
                ).first()
            self._workspace_of_task[task_id] = row.workspace_id if row else None
        return self._workspace_of_task[task_id]


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

    visibility = _Visibility(runtime, caller)
    async with runtime.bus.subscribe() as queue:
        forwarding = asyncio.create_task(_forward(queue, visibility, send))
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


async def _forward(queue: asyncio.Queue[Event], visibility: _Visibility, send: Any) -> None:
    while True:
        event = await queue.get()
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
