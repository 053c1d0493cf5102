"""Durable clarification writes. Each is one statement whose WHERE clause applies the rule, so a
concurrent answer, a newer turn or a repeated pass can never be overwritten by a stale read.
The turn-teardown ones run on every answer, so they are built once with bound parameters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, insert, not_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.authority.sql import current_turn_id
from backend.clock import utcnow
from backend.db.json import json_flag, json_merge
from backend.db.tables import messages
from backend.ids import new_id
from backend.request_evidence import constant, is_pending_row, pending_id
from backend.vocabulary import MessageType, RequestStatus
from backend.workers import DeadOwners, owner_stamp


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    options: tuple[str, ...] = ()
    #: Several options may be picked (otherwise at most one).
    multi_select: bool = False


def _is_clarification() -> Any:
    return messages.c.type == constant(MessageType.CLARIFICATION_REQUEST.value)


async def create_bundle(
    conn: AsyncConnection,
    *,
    session_id: str,
    task_id: str,
    turn_id: str,
    questions: Sequence[Question],
) -> tuple[str, list[dict[str, Any]]]:
    """Insert one pending ``clarification_request`` row per question, sharing a new pending id."""
    bundle_id = new_id()
    now = utcnow()
    rows = [
        {
            "id": new_id(),
            "session_id": session_id,
            "task_id": task_id,
            "turn_id": turn_id,
            "type": MessageType.CLARIFICATION_REQUEST.value,
            "author": "agent",
            "content": q.question,
            "metadata": {
                "pending_id": bundle_id,
                "status": RequestStatus.PENDING.value,
                "question": q.question,
                "options": [
                    {"id": f"o{i}", "label": label} for i, label in enumerate(q.options, 1)
                ],
                "multi_select": q.multi_select,
                "agent_disconnected": False,
                "position": position,
                # The worker about to hold the agent's wait (another worker routes an answer
                # to it while the bundle is live: ``backend/clarifications/handover.py``).
                **owner_stamp(),
            },
            "created_at": now,
        }
        for position, q in enumerate(questions)
    ]
    await conn.execute(insert(messages), rows)
    return bundle_id, rows


def _current_turn_pending() -> Any:
    """Pending questions of the current turn of session ``session``."""
    return and_(
        messages.c.session_id == bindparam("session"),
        _is_clarification(),
        is_pending_row(messages),
        messages.c.turn_id == current_turn_id(bindparam("session")),
    )


def _detach_statement(*where: Any) -> Any:
    """The one detach statement: only rows not yet detached change, and only those are
    returned (to be announced once)."""
    return (
        update(messages)
        .where(*where, not_(json_flag(messages.c.metadata, "agent_disconnected")))
        .values(metadata=json_merge(messages.c.metadata, {"agent_disconnected": True}))
        .returning(*messages.c)
    )


#: :func:`detach`'s statement by whether it names a bundle and a turn.
_DETACH = {
    (by_bundle, by_turn): _detach_statement(
        _current_turn_pending(),
        *([pending_id(messages) == bindparam("bundle")] if by_bundle else []),
        *([messages.c.turn_id == bindparam("turn")] if by_turn else []),
    )
    for by_bundle in (False, True)
    for by_turn in (False, True)
}
_EXPIRE = (
    update(messages)
    .where(_current_turn_pending())
    .values(metadata=json_merge(messages.c.metadata, {"status": RequestStatus.EXPIRED.value}))
    .returning(*messages.c)
)


def _rows(result: Any) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in result]


async def detach(
    conn: AsyncConnection,
    session_id: str,
    *,
    bundle_id: str | None = None,
    turn_id: str | None = None,
) -> list[dict[str, Any]]:
    """Mark pending, not yet detached rows of the *current durable turn* as detached.

    Returns only the rows this statement changed, so callers publish exactly those: a second
    pass (or a pass racing an answer or a newer turn) changes and publishes nothing.
    """
    stmt = _DETACH[bundle_id is not None, turn_id is not None]
    params = {"session": session_id, "bundle": bundle_id, "turn": turn_id}
    return _rows(await conn.execute(stmt, params))


async def detach_orphans(conn: AsyncConnection, owners: DeadOwners) -> list[dict[str, Any]]:
    """:func:`detach` every session's current-turn questions whose waiting worker is gone
    (``owners``): nobody holds their wait any more."""
    stmt = _detach_statement(
        _is_clarification(),
        is_pending_row(messages),
        owners.where(messages.c.metadata),
        messages.c.turn_id == current_turn_id(messages.c.session_id),
    )
    return _rows(await conn.execute(stmt))


async def expire_current_turn(conn: AsyncConnection, session_id: str) -> list[dict[str, Any]]:
    """Expire every pending clarification of the session's current turn (terminal sessions)."""
    return _rows(await conn.execute(_EXPIRE, {"session": session_id}))
