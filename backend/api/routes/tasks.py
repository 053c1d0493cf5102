"""Tasks, the task list and the boot payload over HTTP: thin adapters over
:mod:`backend.services.tasks` and :mod:`backend.services.boot` (every summary they return is
repaired first)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from backend.api.deps import CallerDep, RuntimeDep
from backend.api.responses import plain_json
from backend.api.schemas import CreateTaskBody, MoveTaskBody
from backend.services.boot import boot_payload
from backend.services.tasks import (
    add_task,
    delete_visible_task,
    list_visible_tasks,
    move_visible_task,
    visible_task_view,
)

router = APIRouter(prefix="/api/v1")


@router.get("/tasks")
async def list_tasks(
    runtime: RuntimeDep, caller: CallerDep, workspace_id: str | None = None
) -> Any:
    return plain_json({"tasks": await list_visible_tasks(runtime, caller, workspace_id)})


@router.get("/tasks/{task_id}")
async def get_task(task_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    return await visible_task_view(runtime, caller, task_id)


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


@router.get("/boot")
async def boot(runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Everything a client needs to start, limited to the caller's workspaces."""
    return plain_json(await boot_payload(runtime, caller))
