"""Read models for the workspace overview page: workspaces with their tasks."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, true
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import task_pending_actions
from backend.db.engine import read_tx
from backend.models import Task, Workflow, WorkflowStep, Workspace

_tasks = Task.__table__  # type: ignore[attr-defined]
_steps = WorkflowStep.__table__  # type: ignore[attr-defined]
_workspaces = Workspace.__table__  # type: ignore[attr-defined]
_workflows = Workflow.__table__  # type: ignore[attr-defined]


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
            await conn.execute(select(_workspaces.c.id, _workspaces.c.name).order_by("name", "id"))
        ).all()
        task_rows = (
            await conn.execute(
                select(
                    _tasks.c.id,
                    _tasks.c.workspace_id,
                    _tasks.c.title,
                    _tasks.c.state,
                    _steps.c.name.label("step_name"),
                )
                .join(_steps, _steps.c.id == _tasks.c.workflow_step_id)
                .order_by(_steps.c.position, _tasks.c.created_at, _tasks.c.id)
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
