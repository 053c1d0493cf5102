"""The boot payload: everything a client needs to start, limited to the caller's workspaces."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from backend.access import Caller
from backend.db.engine import read_tx
from backend.models import Workflow, WorkflowStep, Workspace
from backend.runtime import Runtime
from backend.services.tasks import task_views

_workspaces = Workspace.__table__  # type: ignore[attr-defined]
_workflows = Workflow.__table__  # type: ignore[attr-defined]
_steps = WorkflowStep.__table__  # type: ignore[attr-defined]


async def boot_payload(runtime: Runtime, caller: Caller) -> dict[str, Any]:
    """The projection epoch, the caller, their workspaces, those workspaces' workflows with
    their steps, and their tasks with repaired summaries."""
    async with read_tx(runtime.engine) as conn:
        workspaces = (
            await conn.execute(
                select(_workspaces)
                .where(caller.workspace_filter(_workspaces.c.id))
                .order_by(_workspaces.c.name)
            )
        ).all()
        workflows = (
            await conn.execute(
                select(_workflows).where(caller.workspace_filter(_workflows.c.workspace_id))
            )
        ).all()
        steps = (await conn.execute(select(_steps).order_by(_steps.c.position))).all()
    return {
        "epoch": str(runtime.revisions.epoch),
        "user": {"id": caller.user_id, "name": caller.name},
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
        "tasks": await task_views(runtime, caller.task_filter()),
    }
