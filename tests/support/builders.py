"""Readable test data: a workspace, tasks, sessions, turns and request rows at chosen times.

Times are seconds after a fixed instant so ordering ties can be written down exactly.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend.db.engine import write_tx
from backend.db.tables import table_of
from backend.ids import new_id
from backend.models import (
    MessageType,
    RequestStatus,
    SessionState,
    Task,
    TaskSession,
    TaskSessionMessage,
    TaskSessionTurn,
    Workflow,
    WorkflowStep,
    Workspace,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MISSING = object()


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class World:
    """Inserts rows through one engine; every method commits on its own."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.workspace_id = new_id()
        self.workflow_id = new_id()
        self.step_id = new_id()
        self._ready = False

    async def _insert(self, model: Any, **values: Any) -> str:
        values.setdefault("id", new_id())
        async with write_tx(self.engine) as conn:
            await self._ensure_workspace(conn)
            await conn.execute(insert(table_of(model)).values(**values))
        return values["id"]

    async def _ensure_workspace(self, conn: AsyncConnection) -> None:
        if self._ready:
            return
        await conn.execute(
            insert(table_of(Workspace)).values(id=self.workspace_id, name="W", created_at=T0)
        )
        await conn.execute(
            insert(table_of(Workflow)).values(
                id=self.workflow_id, workspace_id=self.workspace_id, name="Default", created_at=T0
            )
        )
        await conn.execute(
            insert(table_of(WorkflowStep)).values(
                id=self.step_id, workflow_id=self.workflow_id, name="Backlog", position=0
            )
        )
        self._ready = True

    async def task(self, title: str = "task") -> str:
        return await self._insert(
            Task,
            workspace_id=self.workspace_id,
            workflow_id=self.workflow_id,
            workflow_step_id=self.step_id,
            title=title,
            description="",
            state="TODO",
            created_at=T0,
            updated_at=T0,
        )

    async def session(
        self,
        task_id: str | None = None,
        state: SessionState = SessionState.IDLE,
        is_primary: bool = True,
        created: float = 0,
    ) -> str:
        task_id = task_id or await self.task()
        self.last_task_id = task_id
        return await self._insert(
            TaskSession,
            task_id=task_id,
            state=state.value,
            is_primary=is_primary,
            agent_profile="mock",
            prompt_generation=0,
            created_at=at(created),
            updated_at=at(created),
        )

    async def turn(
        self,
        session_id: str,
        started: float,
        created: float | None = None,
        meta: dict[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> str:
        values: dict[str, Any] = {
            "session_id": session_id,
            "task_id": "",
            "prompt_generation": 0,
            "started_at": at(started),
            "created_at": at(started if created is None else created),
            "metadata": meta or {},
        }
        if turn_id is not None:
            values["id"] = turn_id
        return await self._insert(TaskSessionTurn, **values)

    async def message(
        self,
        session_id: str,
        turn_id: str | None,
        type_: MessageType = MessageType.MESSAGE,
        meta: dict[str, Any] | None = None,
        created: float = 0,
    ) -> str:
        return await self._insert(
            TaskSessionMessage,
            session_id=session_id,
            task_id="",
            turn_id=turn_id,
            type=type_.value,
            author="agent",
            content="",
            metadata=meta or {},
            created_at=at(created),
        )

    async def question(
        self,
        session_id: str,
        turn_id: str | None,
        pending_id: str | None = None,
        status: Any = RequestStatus.PENDING.value,
        type_: MessageType = MessageType.CLARIFICATION_REQUEST,
        **extra: Any,
    ) -> str:
        """One request row; returns its bundle's pending id (pass it again for siblings)."""
        pending_id = pending_id or new_id()
        meta: dict[str, Any] = {"pending_id": pending_id, **extra}
        if status is not MISSING:
            meta["status"] = status
        await self.message(session_id, turn_id, type_, meta)
        return pending_id
