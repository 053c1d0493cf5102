"""Workflow snapshots over HTTP: a thin adapter over :mod:`backend.services.workflows`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.deps import CallerDep, RuntimeDep
from backend.api.responses import plain_json
from backend.services.workflows import visible_workflow_snapshot

router = APIRouter(prefix="/api/v1")


@router.get("/workflows/{workflow_id}/snapshot")
async def workflow_snapshot(workflow_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """``{workflow: {id, workspace_id, name}, steps: [{id, name, position, tasks: [Task]}]}``;
    steps by position, tasks in each step by creation time (as the task list orders them)."""
    return plain_json(await visible_workflow_snapshot(runtime, caller, workflow_id))
