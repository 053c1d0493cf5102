"""Workflow snapshots: a workflow's steps with their tasks (summaries repaired first)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from backend.access import Caller, visible_workflow
from backend.db.engine import read_tx
from backend.db.tables import tasks, workflow_steps, workflows
from backend.errors import NotFound
from backend.runtime import Runtime
from backend.services.tasks import task_views


async def visible_workflow_snapshot(
    runtime: Runtime, caller: Caller, workflow_id: str
) -> dict[str, Any]:
    """``{workflow: {id, workspace_id, name}, steps: [{id, name, position, tasks: [Task]}]}``;
    steps by position, tasks in each step by creation time (as the task list orders them)."""
    async with read_tx(runtime.engine) as conn:
        await visible_workflow(conn, caller, workflow_id)
        workflow = (
            await conn.execute(select(workflows).where(workflows.c.id == workflow_id))
        ).first()
    if workflow is None:
        raise NotFound("no such workflow")
    views = await task_views(runtime, tasks.c.workflow_id == workflow_id)
    # Steps are read after the tasks: every step a task names already existed then.
    async with read_tx(runtime.engine) as conn:
        steps = (
            await conn.execute(
                select(workflow_steps)
                .where(workflow_steps.c.workflow_id == workflow_id)
                .order_by(workflow_steps.c.position, workflow_steps.c.id)
            )
        ).all()
    by_step: dict[str, list[dict[str, Any]]] = {step.id: [] for step in steps}
    for view in views:
        by_step[view["workflow_step_id"]].append(view)
    return {
        "workflow": {
            "id": workflow.id,
            "workspace_id": workflow.workspace_id,
            "name": workflow.name,
        },
        "steps": [
            {
                "id": step.id,
                "name": step.name,
                "position": step.position,
                "tasks": by_step[step.id],
            }
            for step in steps
        ],
    }
