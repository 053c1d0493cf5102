"""Responding to (and, at low level, cancelling) clarification bundles over HTTP: thin
adapters over :mod:`backend.services.clarifications`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.deps import CallerDep, RuntimeDep
from backend.api.schemas import RespondBody
from backend.services.clarifications import cancel_live_bundle, respond_to_bundle

router = APIRouter(prefix="/api/v1/clarification")


@router.post("/{pending_id}/respond")
async def respond(
    pending_id: str, body: RespondBody, runtime: RuntimeDep, caller: CallerDep
) -> Any:
    outcome = await respond_to_bundle(
        runtime, caller, pending_id, body.parsed_answers(), body.rejected, body.reason
    )
    return {"pending_id": pending_id, "outcome": outcome}


@router.post("/{pending_id}/cancel")
async def cancel(pending_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Low-level: cancel a request still held by this process's in-memory waiter store."""
    await cancel_live_bundle(runtime, caller, pending_id)
    return {"pending_id": pending_id, "outcome": "cancelled"}
