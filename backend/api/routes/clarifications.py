"""Responding to (and, at low level, cancelling) clarification bundles."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.deps import RuntimeDep
from backend.api.schemas import RespondBody
from backend.clarifications.respond import Answer

router = APIRouter(prefix="/api/v1/clarification")


@router.post("/{pending_id}/respond")
async def respond(pending_id: str, body: RespondBody, runtime: RuntimeDep) -> Any:
    answers = [Answer(a.message_id, tuple(a.option_ids), a.text) for a in body.answers or []]
    outcome = await runtime.responder.respond(pending_id, answers, body.rejected, body.reason)
    return {"pending_id": pending_id, "outcome": outcome}


@router.post("/{pending_id}/cancel")
async def cancel(pending_id: str, runtime: RuntimeDep) -> Any:
    """Low-level: cancel a request still held by this process's in-memory waiter store."""
    await runtime.orchestrator.cancel_live(pending_id)
    return {"pending_id": pending_id, "outcome": "cancelled"}
