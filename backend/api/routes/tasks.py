"""Tasks, the task list and the boot payload; every summary they return is repaired first.

Creating a task and moving it between workflow steps run the transactions of
:mod:`backend.workflow` (the move is guarded by the workflow guard).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Response
from sqlalchemy import and_, select
from sqlalchemy.sql.elements import ColumnElement

from backend.access import Caller, visible_task
from backend.api.deps import CallerDep, RuntimeDep
from backend.api.responses import plain_json
from backend.api.schemas import CreateTaskBody, MoveTaskBody
from backend.authority.sql import tasks
from backend.db.engine import read_tx, write_tx
from backend.errors import NotFound
from backend.events import Event
from backend.models import Workflow, WorkflowStep, Workspace
from backend.runtime import Runtime
from backend.task_deletion import delete_task_rows
from backend.workflow import insert_task_row, move_task_to_step

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1")

#: The Task shape of the API contract (plus ``status_summary``), read and nothing more.
TASK_FIELDS = ("id", "workspace_id", "title", "workflow_id", "workflow_step_id", "state")

_workspaces = Workspace.__table__  # type: ignore[attr-defined]
_workflows = Workflow.__table__  # type: ignore[attr-defined]
_steps = WorkflowStep.__table__  # type: ignore[attr-defined]


async def task_views(runtime: Runtime, where: ColumnElement[bool]) -> list[dict[str, Any]]:
    """Tasks in the contract's shape, each with its repaired ``status_summary``."""
    views = []
    for row, summary in await runtime.summaries.repaired_rows(where, TASK_FIELDS):
        view = dict(zip(TASK_FIELDS, row, strict=False))
        view["status_summary"] = summary.to_json() if summary is not None else None
        views.append(view)
    return views


@router.get("/tasks")
async def list_tasks(
    runtime: RuntimeDep, caller: CallerDep, workspace_id: str | None = None
) -> Any:
    where = caller.task_filter()
    if workspace_id:
        where = and_(where, tasks.c.workspace_id == workspace_id)
    return plain_json({"tasks": await task_views(runtime, where)})


async def one_task_view(runtime: Runtime, task_id: str) -> dict[str, Any]:
    views = await task_views(runtime, tasks.c.id == task_id)
    if not views:
        raise NotFound("no such task")
    return views[0]


async def _announce(runtime: Runtime, event: Event) -> None:
    """After commit: a failed publication does not undo the committed change (clients
    converge on their next read), so it is logged, not returned as an error."""
    try:
        await runtime.events.publish(event)
    except Exception as error:
        log.warning("could not publish %s: %r", event.type, error)


@router.get("/tasks/{task_id}")
async def get_task(task_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    async with read_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
    return await one_task_view(runtime, task_id)


async def add_task(
    runtime: Runtime,
    caller: Caller,
    *,
    title: str,
    description: str = "",
    workspace_id: str | None = None,
    workflow_id: str | None = None,
) -> dict[str, Any]:
    """Create a task in the first step of its workflow and announce it (REST and UI)."""
    async with write_tx(runtime.engine) as conn:
        row = await insert_task_row(
            conn,
            caller,
            title=title,
            description=description,
            workspace_id=workspace_id,
            workflow_id=workflow_id,
        )
    await _announce(
        runtime, Event("task.created", {"task_id": row["id"], "workspace_id": row["workspace_id"]})
    )
    return await one_task_view(runtime, row["id"])


async def move_visible_task(
    runtime: Runtime, caller: Caller, task_id: str, workflow_step_id: str
) -> dict[str, Any]:
    """Move a visible task through the workflow guard and announce it (REST and UI)."""
    async with write_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
        result = await move_task_to_step(conn, task_id, workflow_step_id)
    if result.moved:
        await _announce(
            runtime,
            Event("task.updated", {"task_id": result.task_id, "workspace_id": result.workspace_id}),
        )
    return await one_task_view(runtime, task_id)


async def delete_visible_task(runtime: Runtime, caller: Caller, task_id: str) -> None:
    """Delete a visible task and everything of it in one write transaction, then announce
    ``task.deleted`` (REST and UI). 404 when missing or invisible; 409 ``task_busy`` while
    work for it is in flight (:mod:`backend.task_deletion`)."""
    async with write_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
        deleted = await delete_task_rows(conn, task_id)
    await _announce(
        runtime,
        Event("task.deleted", {"task_id": deleted.task_id, "workspace_id": deleted.workspace_id}),
    )


@router.post("/tasks", status_code=201)
async def create_task(body: CreateTaskBody, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """A new task in the first step (Backlog) of its workflow. Without ``workflow_id`` the
    workspace's workflow is used; without ``workspace_id`` the first workspace by name."""
    return await add_task(
        runtime,
        caller,
        title=body.title,
        description=body.description,
        workspace_id=body.workspace_id,
        workflow_id=body.workflow_id,
    )


@router.post("/tasks/{task_id}/move")
async def move_task(
    task_id: str, body: MoveTaskBody, runtime: RuntimeDep, caller: CallerDep
) -> Any:
    """Move the task to another step of its workflow.

    404 unknown task; 400 ``validation`` for a step outside the task's workflow; 200 no-op for
    the current step; 409 ``clarification_pending`` while a session of the task has an active
    clarification; 503 ``guard_unavailable`` when that cannot be read (fail closed, nothing
    moved). The guard and the update share one write transaction
    (:func:`backend.workflow.move_task_to_step`).
    """
    return await move_visible_task(runtime, caller, task_id, body.workflow_step_id)


@router.delete("/tasks/{task_id}", status_code=204)
async def delete_task(task_id: str, runtime: RuntimeDep, caller: CallerDep) -> Response:
    """Delete the task with its sessions, turns, messages and summary: 204. 404 when missing
    or not visible; 409 ``task_busy`` (with the busy ``session_ids``, nothing deleted) while a
    session works on a turn, an answer is being delivered or a detached resume is in flight."""
    await delete_visible_task(runtime, caller, task_id)
    return Response(status_code=204)


async def boot_payload(runtime: Runtime, caller: Caller) -> dict[str, Any]:
    """Everything a client needs to start, limited to the caller's workspaces (REST and UI)."""
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


@router.get("/boot")
async def boot(runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Everything a client needs to start, limited to the caller's workspaces."""
    return plain_json(await boot_payload(runtime, caller))
