"""Clarification-bundle use cases: answering or skipping a bundle, and the low-level cancel
of a request still held by this process's in-memory waiter store."""

from __future__ import annotations

from backend.access import Caller, visible_bundle
from backend.clarifications.answers import Answer
from backend.db.engine import read_tx
from backend.runtime import Runtime


async def _require_bundle(runtime: Runtime, caller: Caller, pending_id: str) -> None:
    """404 unless the bundle belongs to a session the caller can see (before any work)."""
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
    """Answer or Skip a visible bundle; returns the outcome. Raises the responder's errors:
    ``NotActive`` (409), ``DeliveryFailed`` (500, ``retryable``), 400s; 404 for a bundle the
    caller cannot see (checked in the responder's first read, before any work)."""
    return await runtime.responder.respond(
        pending_id,
        answers,
        rejected,
        reason,
        authorize=lambda conn: visible_bundle(conn, caller, pending_id),
    )


async def cancel_live_bundle(runtime: Runtime, caller: Caller, pending_id: str) -> None:
    """Cancel a visible bundle's request still held by this process's live waiter."""
    await _require_bundle(runtime, caller, pending_id)
    await runtime.orchestrator.cancel_live(pending_id)
