"""Answering an agent's permission request over HTTP: a thin adapter over
:mod:`backend.services.permissions`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.deps import CallerDep, RuntimeDep
from backend.api.permission_schemas import PermissionRespondBody
from backend.services.permissions import respond_to_permission

router = APIRouter(prefix="/api/v1/permission")


@router.post("/{pending_id}/respond")
async def respond(
    pending_id: str, body: PermissionRespondBody, runtime: RuntimeDep, caller: CallerDep
) -> Any:
    outcome = await respond_to_permission(runtime, caller, pending_id, body.option_id)
    return {"pending_id": pending_id, "outcome": outcome}
