"""Which bus events a caller may see: those about tasks in the caller's workspaces.

Events name a task, a session or a workspace; the rest is looked up. A task's workspace and a
session's task never change, so one :class:`EventVisibility` caches them for as long as it
lives (one event-stream connection).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from backend.access import Caller
from backend.db.engine import read_tx
from backend.db.tables import sessions, tasks
from backend.events import Event
from backend.runtime import Runtime


class EventVisibility:
    """Which workspace each task belongs to (it never changes), cached per connection."""

    def __init__(self, runtime: Runtime, caller: Caller) -> None:
        self.runtime = runtime
        self.caller = caller
        self._workspace_of_task: dict[str, str | None] = {}
        self._task_of_session: dict[str, str | None] = {}

    async def allows(self, event: Event) -> bool:
        """Whether the caller may see ``event``; raises when a lookup fails."""
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
