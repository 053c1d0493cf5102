"""Responding to (and, at low level, cancelling) clarification bundles."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.access import Caller, visible_bundle
from backend.api.deps import CallerDep, RuntimeDep
from backend.api.schemas import RespondBody
from backend.clarifications.respond import Answer
from backend.db.engine import read_tx
from backend.runtime import Runtime

router = APIRouter(prefix="/api/v1/clarification")


async def _require_bundle(runtime: Runtime, caller: Caller, pending_id: str) -> None:
    async with read_tx(runtime.engine) as conn:
        await visible_bundle(conn, caller, pending_id)


async def respond_to_bundle(
    runtime: Runtime,
    caller: Caller,
    pending_id: str,
    answers: list[Answer],
    rejected: bool,
    reason: str | None = None,
) -> str:
    """Answer or Skip a visible bundle (REST and UI); returns the outcome. Raises the
    responder's errors: ``NotActive`` (409), ``DeliveryFailed`` (500, ``retryable``), 400s."""
    await _require_bundle(runtime, caller, pending_id)
    return await runtime.responder.respond(pending_id, answers, rejected, reason)


@router.post("/{pending_id}/respond")
async def respond(
    pending_id: str, body: RespondBody, runtime: RuntimeDep, caller: CallerDep
) -> Any:
    answers = [Answer(a.message_id, tuple(a.option_ids), a.text) for a in body.answers or []]
    outcome = await respond_to_bundle(
        runtime, caller, pending_id, answers, body.rejected, body.reason
    )
    return {"pending_id": pending_id, "outcome": outcome}


@router.post("/{pending_id}/cancel")
async def cancel(pending_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Low-level: cancel a request still held by this process's in-memory waiter store."""
    await _require_bundle(runtime, caller, pending_id)
    await runtime.orchestrator.cancel_live(pending_id)
    return {"pending_id": pending_id, "outcome": "cancelled"}
