"""The boot payload: everything a client needs to start, limited to the caller's workspaces."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from backend.access import Caller
from backend.db.engine import read_tx
from backend.db.tables import workflow_steps, workflows, workspaces
from backend.runtime import Runtime
from backend.services.tasks import task_views


async def boot_payload(runtime: Runtime, caller: Caller) -> dict[str, Any]:
    """The projection epoch, the caller, their workspaces, those workspaces' workflows with
    their steps, and their tasks with repaired summaries."""
    async with read_tx(runtime.engine) as conn:
        workspace_rows = (
            await conn.execute(
                select(workspaces)
                .where(caller.workspace_filter(workspaces.c.id))
                .order_by(workspaces.c.name)
            )
        ).all()
        workflow_rows = (
            await conn.execute(
                select(workflows).where(caller.workspace_filter(workflows.c.workspace_id))
            )
        ).all()
        step_rows = (
            await conn.execute(select(workflow_steps).order_by(workflow_steps.c.position))
        ).all()
    return {
        "epoch": str(runtime.revisions.epoch),
        "user": {"id": caller.user_id, "name": caller.name},
        "workspaces": [{"id": w.id, "name": w.name} for w in workspace_rows],
        "workflows": [
            {
                "id": wf.id,
                "workspace_id": wf.workspace_id,
                "name": wf.name,
                "steps": [
                    {"id": st.id, "name": st.name, "position": st.position}
                    for st in step_rows
                    if st.workflow_id == wf.id
                ],
            }
            for wf in workflow_rows
        ],
        "tasks": await task_views(runtime, caller.task_filter()),
    }
