"""Start-up recovery: make every crash window of the respond path safe before serving.

Runs in :meth:`backend.runtime.Runtime.start`, before any prompt is admitted, in the spec's
order; any failure fails start-up (the next start retries) and leaves the evidence in place:

1. **Reservations.** An unpublished successor that was never attempted and has no message
   evidence proves the answer was never dispatched: delete it, give the session back to its
   question, and restore exactly the rows claimed for it. An attempted or evidenced one may
   have reached the agent: keep it as the current turn, keep its answer terminal, and swap its
   recovery keys for a start-event outbox marker.
2. **Delivery intents** left by a response that never reached a handoff: restore the claim to
   pending while its turn is still current; retire it when the session ended or a newer turn
   took over (history is never reactivated).
3. **Abandoned permission requests.** A pending permission request of a live session's current
   turn was waited on by an agent process that stopped with the previous backend: nobody can
   take an answer, so it is cancelled (and announced). Runs after step 2, so a permission
   claim restored there is cancelled too.
4. **Unacknowledged ordinary turns** (the process stopped mid-dispatch): completed ``failed``
   through the outbox, the session freed.
5. **Outbox replay.** Publish ``turn.started`` (and ``turn.completed`` for a finished turn) for
   every marked turn; clear each marker only after the bus accepted its events.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend import failpoints
from backend.authority.sql import DISPATCH_ATTEMPTED, DISPATCH_PENDING, has_message_evidence
from backend.clarifications import claims
from backend.clock import utcnow
from backend.db.engine import write_tx
from backend.db.json import json_flag, json_merge, json_text
from backend.db.tables import messages, turns
from backend.events import Event, EventBus
from backend.orchestrator import reservations
from backend.orchestrator.admission import DISPATCH_UNACKNOWLEDGED, set_state_for_generation
from backend.orchestrator.reservations import (
    CLAIMED_MESSAGES,
    COMPLETION_STATUS,
    SOURCE_PENDING_ID,
    START_EVENT_PENDING,
)
from backend.permissions import store as permission_store
from backend.request_evidence import DELIVERY_INTENT, pending_id
from backend.views import message_view
from backend.vocabulary import SessionState
from backend.workers import EVERY_OWNER_DEAD, INTENT_WORKER_KEY, DeadOwners

log = logging.getLogger(__name__)


class RecoveryError(RuntimeError):
    """Recovery could not prove what to do; start-up must fail and keep the evidence."""


async def recover(
    engine: AsyncEngine, bus: EventBus, owners: DeadOwners = EVERY_OWNER_DEAD
) -> None:
    """``owners``: whose leftovers to settle (with several workers, only those of workers that
    are gone: ``backend/workers.py``)."""
    await failpoints.hit("recovery.reservations")
    async with write_tx(engine) as conn:
        await _reconcile_reservations(conn, owners)
    await failpoints.hit("recovery.intents")
    async with write_tx(engine) as conn:
        await _reconcile_intents(conn, owners)
    await failpoints.hit("recovery.permissions")
    await _cancel_abandoned_permissions(engine, bus, owners)
    async with write_tx(engine) as conn:
        await _fail_unacknowledged_turns(conn, owners)
    await failpoints.hit("recovery.replay")
    await _replay_start_events(engine, bus)


async def _cancel_abandoned_permissions(
    engine: AsyncEngine, bus: EventBus, owners: DeadOwners
) -> None:
    """Cancel the permission requests no agent can answer any more, then name them on the bus
    (the summary projector re-derives their tasks; no client is connected yet, so the events
    carry no projection). A failed publication is logged: reads repair summaries anyway."""
    async with write_tx(engine) as conn:
        cancelled = await permission_store.cancel_abandoned(conn, owners)
    for row in cancelled:
        log.warning("recovery: cancelled permission request %s", row["metadata"]["pending_id"])
        data = {"session_id": row["session_id"], "task_id": row["task_id"]}
        try:
            await bus.publish(
                Event("session.message.updated", {**data, "message": message_view(row)})
            )
        except Exception as error:
            log.warning("recovery: cancelled permission not announced: %r", error)


async def _fail_unacknowledged_turns(conn: AsyncConnection, owners: DeadOwners) -> None:
    """Ordinary turns admitted whose prompt was never acknowledged when the process stopped:
    nobody can tell whether the agent got it, and nothing will finish the turn otherwise, so it
    is completed as ``failed`` (its events go through the outbox) and the session is free for
    the next prompt. An agent that did get it can still talk in it until a newer turn."""
    open_turns = (
        await conn.execute(
            select(turns.c.id, turns.c.session_id, turns.c.prompt_generation).where(
                json_flag(turns.c.metadata, DISPATCH_UNACKNOWLEDGED),
                turns.c.completed_at.is_(None),
                owners.where(turns.c.metadata),
            )
        )
    ).all()
    for turn in open_turns:
        marker = {
            DISPATCH_UNACKNOWLEDGED: None,
            COMPLETION_STATUS: "failed",
            START_EVENT_PENDING: True,
        }
        await conn.execute(
            update(turns)
            .where(turns.c.id == turn.id)
            .values(completed_at=utcnow(), metadata=json_merge(turns.c.metadata, marker))
        )
        await set_state_for_generation(
            conn, turn.session_id, turn.prompt_generation, SessionState.IDLE
        )
        log.warning("recovery: failed turn %s, its prompt was never acknowledged", turn.id)


def _claimed_ids(turn: Any) -> list[str]:
    ids = turn.metadata.get(CLAIMED_MESSAGES)
    if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
        raise RecoveryError(f"reservation {turn.id} has malformed claimed message ids: {ids!r}")
    return ids


async def _reconcile_reservations(conn: AsyncConnection, owners: DeadOwners) -> None:
    reserved = (
        await conn.execute(
            select(
                turns.c.id,
                turns.c.session_id,
                turns.c.prompt_generation,
                turns.c.metadata,
                json_flag(turns.c.metadata, DISPATCH_ATTEMPTED).label("attempted"),
                has_message_evidence(turns).label("evidenced"),
            ).where(json_flag(turns.c.metadata, DISPATCH_PENDING), owners.where(turns.c.metadata))
        )
    ).all()
    for turn in reserved:
        ids = _claimed_ids(turn)  # malformed: raise, and the whole transaction rolls back
        bundle = turn.metadata.get(SOURCE_PENDING_ID)
        if turn.attempted or turn.evidenced:
            # Ambiguous: the agent may have the answer. Keep the successor and the answer.
            await reservations.to_outbox(conn, turn.id)
            await claims.retire_messages(conn, ids)
            # Nobody will deliver that turn's ready event to this process: free the session.
            await set_state_for_generation(
                conn, turn.session_id, turn.prompt_generation, SessionState.IDLE
            )
            log.warning("recovery: kept ambiguous successor %s of bundle %s", turn.id, bundle)
            continue
        # Deletes it, hands the session back and restores exactly the claimed rows.
        await reservations.roll_back(conn, turn.session_id, turn.id, turn.prompt_generation)
        log.warning(
            "recovery: rolled back unattempted reservation %s of bundle %s", turn.id, bundle
        )


async def _reconcile_intents(conn: AsyncConnection, owners: DeadOwners) -> None:
    """Claims that never reached a handoff: restore while current, retire otherwise."""
    intent = json_text(messages.c.metadata, DELIVERY_INTENT)
    held = (
        await conn.execute(
            select(pending_id(messages), intent)
            .where(intent.is_not(None), owners.where(messages.c.metadata, INTENT_WORKER_KEY))
            .distinct()
        )
    ).all()
    for bundle, held_intent in held:
        released = await claims.release(conn, bundle, held_intent)
        if released.restored:
            log.warning("recovery: restored unhanded response to %s", bundle)
        else:
            log.warning("recovery: retired stale response intent on %s", bundle)


async def _replay_start_events(engine: AsyncEngine, bus: EventBus) -> None:
    async with write_tx(engine) as conn:
        marked = (
            await conn.execute(
                select(
                    turns.c.id,
                    turns.c.session_id,
                    turns.c.task_id,
                    turns.c.completed_at,
                    json_text(turns.c.metadata, COMPLETION_STATUS).label("status"),
                )
                .where(json_flag(turns.c.metadata, START_EVENT_PENDING))
                .order_by(turns.c.started_at, turns.c.created_at, turns.c.id)
            )
        ).all()
    for turn in marked:
        data = {"session_id": turn.session_id, "task_id": turn.task_id, "turn_id": turn.id}
        await bus.publish(Event("turn.started", data))
        if turn.completed_at is not None:
            # The status the turn really ended with (turns completed before it was recorded
            # said nothing: "completed", as before).
            status = turn.status or "completed"
            await bus.publish(Event("turn.completed", {**data, "status": status}))
        async with write_tx(engine) as conn:
            await conn.execute(
                update(turns)
                .where(turns.c.id == turn.id)
                .values(metadata=json_merge(turns.c.metadata, {START_EVENT_PENDING: None}))
            )
