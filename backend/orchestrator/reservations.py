"""Successor reservations for detached answers: the at-most-once dispatch boundary.

Before a detached answer is dispatched, its successor turn is durably *reserved* and
unpublished (``prompt_dispatch_pending``), so it does not supersede the bundle it answers.
Immediately before the executor call it is marked ``prompt_dispatch_attempted``: from then on
nobody can prove the agent did not get the answer, so the successor is authoritative and the
answer stays terminal. Acknowledgement publishes it (clears the private keys).

The statements of every dispatch and every ready event are built once with bound parameters.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.authority.sql import DISPATCH_ATTEMPTED, DISPATCH_PENDING, TERMINAL_STATES
from backend.clarifications import claims
from backend.clock import utcnow
from backend.db.json import json_flag, json_merge
from backend.db.tables import sessions, turns
from backend.orchestrator.admission import PRIOR_STATE
from backend.vocabulary import SessionState, TurnMarker
from backend.workers import owner_stamp

SOURCE_TURN = "prompt_dispatch_source_turn_id"
SOURCE_PENDING_ID = "prompt_dispatch_pending_id"
CLAIMED_MESSAGES = "prompt_dispatch_message_ids"
PRIVATE_KEYS = (
    DISPATCH_PENDING,
    DISPATCH_ATTEMPTED,
    SOURCE_TURN,
    SOURCE_PENDING_ID,
    CLAIMED_MESSAGES,
    PRIOR_STATE,
)
#: Turn metadata key: this turn's ``turn.started`` (and maybe ``turn.completed``) must be
#: (re)published before the marker is cleared — the start-event outbox replayed at start-up.
START_EVENT_PENDING = TurnMarker.START_EVENT_PENDING.value
#: Turn metadata key: how the turn ended (``completed``, ``failed``, ``paused``), so a replayed
#: ``turn.completed`` tells the truth.
COMPLETION_STATUS = "completion_status"


def reservation_metadata(
    source_turn_id: str | None, pending_id: str, claimed_message_ids: list[str]
) -> dict[str, Any]:
    return {
        DISPATCH_PENDING: True,
        SOURCE_TURN: source_turn_id,
        SOURCE_PENDING_ID: pending_id,
        CLAIMED_MESSAGES: claimed_message_ids,
        **owner_stamp(),
    }


def _mark(patch: dict[str, Any], *, reserved: bool) -> Any:
    """Merge ``patch`` into turn ``turn`` (only while it is a reservation, if ``reserved``)."""
    where = [turns.c.id == bindparam("turn")]
    if reserved:
        where.append(json_flag(turns.c.metadata, DISPATCH_PENDING))
    return (
        update(turns)
        .where(*where)
        .values(metadata=json_merge(turns.c.metadata, patch))
        .returning(turns.c.id)
    )


_MARK_ATTEMPTED = _mark({DISPATCH_ATTEMPTED: True}, reserved=True)
_PUBLISH = _mark(dict.fromkeys(PRIVATE_KEYS), reserved=False)
_TO_OUTBOX = _mark({**dict.fromkeys(PRIVATE_KEYS), START_EVENT_PENDING: True}, reserved=True)


async def _marked(conn: AsyncConnection, stmt: Any, turn_id: str) -> bool:
    return (await conn.execute(stmt, {"turn": turn_id})).first() is not None


async def mark_attempted(conn: AsyncConnection, turn_id: str) -> bool:
    return await _marked(conn, _MARK_ATTEMPTED, turn_id)


async def publish(conn: AsyncConnection, turn_id: str) -> bool:
    """Clear the private dispatch keys: the successor is an ordinary, visible turn now."""
    return await _marked(conn, _PUBLISH, turn_id)


async def to_outbox(conn: AsyncConnection, turn_id: str) -> bool:
    """The agent may have the successor (accepted, or ambiguous) but its start event was not
    published: drop the private keys (it is an ordinary current turn now, so ready handling no
    longer waits for it) and leave the start-event outbox marker for start-up replay."""
    return await _marked(conn, _TO_OUTBOX, turn_id)


_UNRESOLVED = (
    select(turns.c.id)
    .where(
        turns.c.session_id == bindparam("session"),
        turns.c.id != bindparam("other_than"),
        json_flag(turns.c.metadata, DISPATCH_PENDING),
    )
    .limit(1)
)


async def unresolved(conn: AsyncConnection, session_id: str, other_than: str) -> str | None:
    """The id of a reservation of ``session_id`` (other than ``other_than``) whose dispatch
    has not resolved yet: neither published, nor rolled back, nor moved to the outbox."""
    params = {"session": session_id, "other_than": other_than}
    return (await conn.execute(_UNRESOLVED, params)).scalar_one_or_none()


async def roll_back(
    conn: AsyncConnection, session_id: str, turn_id: str, generation: int
) -> claims.Released | None:
    """Delete a still-unpublished reservation, hand the session back to the generation and
    state it displaced (so the predecessor turn and its ready event own it again), and release
    exactly the claim it carried — one transaction, so nobody (a waiting ready event, the
    workflow guard) can see the session handed back while the answer still looks claimed.
    ``None`` when there was no such reservation."""
    deleted = (
        await conn.execute(
            delete(turns)
            .where(turns.c.id == turn_id, json_flag(turns.c.metadata, DISPATCH_PENDING))
            .returning(turns.c.metadata)
        )
    ).first()
    if deleted is None:
        return None
    metadata = deleted.metadata or {}
    prior = metadata.get(PRIOR_STATE) or SessionState.WAITING_FOR_INPUT.value
    await conn.execute(
        update(sessions)
        .where(
            sessions.c.id == session_id,
            sessions.c.prompt_generation == generation,
            sessions.c.state.not_in(TERMINAL_STATES),
        )
        .values(state=prior, prompt_generation=generation - 1, updated_at=utcnow())
    )
    claimed = metadata.get(CLAIMED_MESSAGES)
    return await claims.release_messages(conn, claimed if isinstance(claimed, list) else [])
