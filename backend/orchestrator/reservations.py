"""Successor reservations for detached answers: the at-most-once dispatch boundary.

Before a detached answer is dispatched, its successor turn is durably *reserved* and
unpublished (``prompt_dispatch_pending``), so it does not supersede the bundle it answers.
Immediately before the executor call it is marked ``prompt_dispatch_attempted``: from then on
nobody can prove the agent did not get the answer, so the successor is authoritative and the
answer stays terminal. Acknowledgement publishes it (clears the private keys).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.authority.sql import DISPATCH_ATTEMPTED, DISPATCH_PENDING, turns
from backend.db.json import json_flag, json_merge
from backend.orchestrator.admission import set_state_for_generation
from backend.vocabulary import SessionState

SOURCE_TURN = "prompt_dispatch_source_turn_id"
SOURCE_PENDING_ID = "prompt_dispatch_pending_id"
CLAIMED_MESSAGES = "prompt_dispatch_message_ids"
PRIVATE_KEYS = (
    DISPATCH_PENDING,
    DISPATCH_ATTEMPTED,
    SOURCE_TURN,
    SOURCE_PENDING_ID,
    CLAIMED_MESSAGES,
)


def reservation_metadata(
    source_turn_id: str | None, pending_id: str, claimed_message_ids: list[str]
) -> dict[str, Any]:
    return {
        DISPATCH_PENDING: True,
        SOURCE_TURN: source_turn_id,
        SOURCE_PENDING_ID: pending_id,
        CLAIMED_MESSAGES: claimed_message_ids,
    }


async def mark_attempted(conn: AsyncConnection, turn_id: str) -> bool:
    result = await conn.execute(
        update(turns)
        .where(turns.c.id == turn_id, json_flag(turns.c.metadata, DISPATCH_PENDING))
        .values(metadata=json_merge(turns.c.metadata, {DISPATCH_ATTEMPTED: True}))
        .returning(turns.c.id)
    )
    return result.first() is not None


async def publish(conn: AsyncConnection, turn_id: str) -> bool:
    """Clear the private dispatch keys: the successor is an ordinary, visible turn now."""
    result = await conn.execute(
        update(turns)
        .where(turns.c.id == turn_id)
        .values(metadata=json_merge(turns.c.metadata, dict.fromkeys(PRIVATE_KEYS)))
        .returning(turns.c.id)
    )
    return result.first() is not None


async def roll_back(conn: AsyncConnection, session_id: str, turn_id: str, generation: int) -> bool:
    """Delete a still-unpublished reservation and hand the session back to its question."""
    deleted = await conn.execute(
        delete(turns)
        .where(turns.c.id == turn_id, json_flag(turns.c.metadata, DISPATCH_PENDING))
        .returning(turns.c.id)
    )
    if deleted.first() is None:
        return False
    await set_state_for_generation(conn, session_id, generation, SessionState.WAITING_FOR_INPUT)
    return True
