"""Tasks, the task list and the boot payload; every summary they return is repaired first."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from sqlalchemy import select, true
from sqlalchemy.sql.elements import ColumnElement

from backend.api.deps import RuntimeDep
from backend.authority.sql import tasks
from backend.db.engine import read_tx
from backend.errors import NotFound
from backend.models import Workflow, WorkflowStep, Workspace
from backend.projections.summaries import repaired_summaries
from backend.runtime import Runtime

router = APIRouter(prefix="/api/v1")

_workspaces = Workspace.__table__  # type: ignore[attr-defined]
_workflows = Workflow.__table__  # type: ignore[attr-defined]
_steps = WorkflowStep.__table__  # type: ignore[attr-defined]


async def task_views(runtime: Runtime, where: ColumnElement[bool]) -> list[dict[str, Any]]:
    summaries = await repaired_summaries(runtime.engine, runtime.bus, where)
    async with read_tx(runtime.engine) as conn:
        rows = (
            await conn.execute(select(tasks).where(where).order_by(tasks.c.created_at, tasks.c.id))
        ).all()
    views = []
    for row in rows:
        summary = summaries.get(row.id)
        views.append(
            {
                "id": row.id,
                "workspace_id": row.workspace_id,
                "title": row.title,
                "workflow_id": row.workflow_id,
                "workflow_step_id": row.workflow_step_id,
                "state": row.state,
                "status_summary": summary.to_json() if summary is not None else None,
            }
        )
    return views


@router.get("/tasks")
async def list_tasks(runtime: RuntimeDep, workspace_id: str | None = None) -> Any:
    where = tasks.c.workspace_id == workspace_id if workspace_id else true()
    return {"tasks": await task_views(runtime, where)}


@router.get("/tasks/{task_id}")
async def get_task(task_id: str, runtime: RuntimeDep) -> Any:
    views = await task_views(runtime, tasks.c.id == task_id)
    if not views:
        raise NotFound("no such task")
    return views[0]


@router.get("/boot")
async def boot(runtime: RuntimeDep) -> Any:
    async with read_tx(runtime.engine) as conn:
        workspaces = (await conn.execute(select(_workspaces).order_by(_workspaces.c.name))).all()
        workflows = (await conn.execute(select(_workflows))).all()
        steps = (await conn.execute(select(_steps).order_by(_steps.c.position))).all()
    return {
        "epoch": str(runtime.revisions.epoch),
        "user": {"id": "local", "name": "Local user"},
        "workspaces": [{"id": w.id, "name": w.name} for w in workspaces],
        "workflows": [
            {
                "id": wf.id,
                "workspace_id": wf.workspace_id,
                "name": wf.name,
                "steps": [
                    {"id": st.id, "name": st.name, "position": st.position}
                    for st in steps
                    if st.workflow_id == wf.id
                ],
            }
            for wf in workflows
        ],
        "tasks": await task_views(runtime, true()),
    }
