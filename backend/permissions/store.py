"""Durable permission-request writes. Each is one compare-and-set ``UPDATE ... RETURNING`` whose
WHERE clause applies the rule, so a concurrent response, a newer turn, a terminal state or a
repeated pass can never be overwritten by a stale read, and callers publish exactly the rows a
statement returned (a second pass returns, and publishes, nothing).

States of a request row (``metadata.status``): ``pending`` → claimed by a response (status
``answered`` plus a ``delivery_intent``: the spec's ``delivery_claimed``) → confirmed by the
waiting agent (intent retired, ``answered``: ``claims.confirm_live``, keyed by the intent like
every clarification claim), put back to ``pending`` when the responder left before handing it
over (``claims.restore``), or released to ``cancelled`` when the agent never took it. A wait
that ends without an answer leaves ``cancelled`` (turn still current) or ``expired`` (session
terminal); a superseded request is left as it is (inert history).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, exists, insert, literal, not_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement

from backend.authority.sql import TERMINAL_STATES, current_turn_id
from backend.clock import utcnow
from backend.db.json import json_merge, json_text
from backend.db.tables import messages, sessions
from backend.ids import new_id
from backend.orchestrator.admission import AdmittedTurn
from backend.permissions.requests import PermissionOption, request_metadata
from backend.request_evidence import (
    DELIVERY_INTENT,
    constant,
    has_delivery_intent,
    is_pending_row,
    pending_id,
)
from backend.vocabulary import MessageType, RequestStatus
from backend.workers import EVERY_OWNER_DEAD, INTENT_WORKER_KEY, DeadOwners, owner_stamp


def _request(bundle_id: str) -> ColumnElement[bool]:
    return and_(
        messages.c.type == constant(MessageType.PERMISSION_REQUEST.value),
        pending_id(messages) == bundle_id,
    )


def _open(bundle_id: str) -> ColumnElement[bool]:
    """Still waiting for the user: pending, and no response holds it."""
    return and_(_request(bundle_id), is_pending_row(messages), not_(has_delivery_intent(messages)))


def _held(bundle_id: str, intent_id: str) -> ColumnElement[bool]:
    return and_(_request(bundle_id), json_text(messages.c.metadata, DELIVERY_INTENT) == intent_id)


def _session_terminal() -> ColumnElement[bool]:
    return exists().where(
        sessions.c.id == messages.c.session_id, sessions.c.state.in_(TERMINAL_STATES)
    )


def _of_current_turn() -> ColumnElement[bool]:
    return messages.c.turn_id == current_turn_id(messages.c.session_id)


async def _set(
    conn: AsyncConnection, where: ColumnElement[bool], patch: dict[str, Any]
) -> list[dict[str, Any]]:
    stmt = (
        update(messages)
        .where(where)
        .values(metadata=json_merge(messages.c.metadata, patch))
        .returning(*messages.c)
    )
    return [dict(row._mapping) for row in await conn.execute(stmt)]


async def insert_request(
    conn: AsyncConnection, turn: AdmittedTurn, title: str, options: Sequence[PermissionOption]
) -> dict[str, Any]:
    """One pending ``permission_request`` row in ``turn`` (a bundle of one), by the agent,
    its content the title (what the transcript shows)."""
    row = dict(
        id=new_id(),
        type=MessageType.PERMISSION_REQUEST.value,
        metadata={**request_metadata(new_id(), title, options), **owner_stamp()},
        content=title,
        author="agent",
        created_at=utcnow(),
        session_id=turn.session_id,
        task_id=turn.task_id,
        turn_id=turn.turn_id,
    )
    await conn.execute(insert(messages).values(**row))
    return row


async def claim(
    conn: AsyncConnection, session_id: str, bundle_id: str, answer: dict[str, Any], intent_id: str
) -> list[dict[str, Any]]:
    """A response takes the open request of the session's current turn: ``answered`` with the
    chosen option and the response's delivery intent. Empty when anything else got there first."""
    where = and_(
        _open(bundle_id),
        messages.c.session_id == session_id,
        messages.c.turn_id == current_turn_id(literal(session_id)),
    )
    patch = {
        "status": RequestStatus.ANSWERED.value,
        "answer": answer,
        DELIVERY_INTENT: intent_id,
        **owner_stamp(INTENT_WORKER_KEY),
    }
    return await _set(conn, where, patch)


async def release(conn: AsyncConnection, bundle_id: str, intent_id: str) -> list[dict[str, Any]]:
    """A claim the agent never took (it stopped waiting): the request is over, ``cancelled``.
    Keyed by the intent, so it races the agent's confirmation and exactly one of them wins."""
    patch = {"status": RequestStatus.CANCELLED.value, "answer": None, DELIVERY_INTENT: None}
    return await _set(conn, _held(bundle_id, intent_id), patch)


async def settle(conn: AsyncConnection, bundle_id: str) -> list[dict[str, Any]]:
    """The agent's wait ended without an answer: an open request of a terminal session
    ``expired`` (as clarifications do), one of the current turn ``cancelled``; a superseded
    one is left as it is (supersession writes nothing; the rule already makes it inert)."""
    expired = await _set(
        conn,
        and_(_open(bundle_id), _session_terminal()),
        {"status": RequestStatus.EXPIRED.value},
    )
    cancelled = await _set(
        conn,
        and_(_open(bundle_id), not_(_session_terminal()), _of_current_turn()),
        {"status": RequestStatus.CANCELLED.value},
    )
    return expired + cancelled


async def still_waiting(conn: AsyncConnection, bundle_id: str) -> bool:
    """The request is still pending, or held by a response (not settled by anyone)."""
    stmt = select(messages.c.id).where(
        _request(bundle_id), is_pending_row(messages) | has_delivery_intent(messages)
    )
    return (await conn.execute(stmt.limit(1))).first() is not None


async def cancel_abandoned(
    conn: AsyncConnection, owners: DeadOwners = EVERY_OWNER_DEAD
) -> list[dict[str, Any]]:
    """Start-up: every open request of a live session's current turn was waited on by an agent
    process that stopped with the previous backend, so nobody can take an answer: cancel them.
    Superseded or terminal-session requests are inert already and stay untouched (history)."""
    where = and_(
        messages.c.type == constant(MessageType.PERMISSION_REQUEST.value),
        is_pending_row(messages),
        not_(has_delivery_intent(messages)),
        not_(_session_terminal()),
        _of_current_turn(),
        owners.where(messages.c.metadata),
    )
    return await _set(conn, where, {"status": RequestStatus.CANCELLED.value})
