"""Read models for the workspace overview page: workspaces with their tasks."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, true
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import task_pending_actions
from backend.db.engine import read_tx
from backend.db.tables import tasks, workflow_steps, workspaces


@dataclass(frozen=True, slots=True)
class TaskView:
    id: str
    title: str
    state: str
    step_name: str
    pending_action: str | None


@dataclass(frozen=True, slots=True)
class WorkspaceView:
    id: str
    name: str
    tasks: tuple[TaskView, ...]


async def list_workspaces_with_tasks(engine: AsyncEngine) -> list[WorkspaceView]:
    """Every workspace with its tasks in board order; pending actions come from the rule."""
    async with read_tx(engine) as conn:
        workspace_rows = (
            await conn.execute(select(workspaces.c.id, workspaces.c.name).order_by("name", "id"))
        ).all()
        task_rows = (
            await conn.execute(
                select(
                    tasks.c.id,
                    tasks.c.workspace_id,
                    tasks.c.title,
                    tasks.c.state,
                    workflow_steps.c.name.label("step_name"),
                )
                .join(workflow_steps, workflow_steps.c.id == tasks.c.workflow_step_id)
                .order_by(workflow_steps.c.position, tasks.c.created_at, tasks.c.id)
            )
        ).all()
        pending = await task_pending_actions(conn, true())
    by_workspace: dict[str, list[TaskView]] = {}
    for row in task_rows:
        action = pending.get(row.id)
        by_workspace.setdefault(row.workspace_id, []).append(
            TaskView(row.id, row.title, row.state, row.step_name, action.value if action else None)
        )
    return [WorkspaceView(w.id, w.name, tuple(by_workspace.get(w.id, ()))) for w in workspace_rows]
