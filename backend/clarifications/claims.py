"""Response claims: the compare-and-set statements behind ``/respond``.

A claim moves a bundle's pending rows of the current turn to their provisional terminal status
and stamps them with a durable delivery intent, in one UPDATE. Finalize (the answer reached its
handoff boundary) and restore (it did not: back to pending) are each one UPDATE keyed by the
intent id, so whichever runs first wins and the other changes nothing.

Every statement here runs on the answer path, so each is built once with bound parameters
(building one in SQLAlchemy costs more event-loop CPU than running it; see
``backend/authority/scope.py``); a claim's statement depends on its number of rows only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import and_, bindparam, case, func, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.authority import BundleFacts, BundleState, LiveWaiters, bundle_facts, classify_bundle
from backend.authority.sql import current_turn_id
from backend.clarifications.waiters import LiveWaiter
from backend.db.json import json_merge, json_text, patch_param
from backend.db.tables import messages, sessions
from backend.errors import NotActive, NotFound
from backend.orchestrator.admission import set_state_for_generation
from backend.request_evidence import DELIVERY_INTENT, constant, is_pending_row, pending_id
from backend.vocabulary import TERMINAL_SESSION_STATES, MessageType, RequestStatus, SessionState
from backend.workers import INTENT_WORKER_KEY, other_live_workers, owner_stamp

DELIVERY_PATH = "delivery_path"
#: Keys a claim adds, all removed again by a restore.
_CLAIM_KEYS = ("answer", "reason", DELIVERY_INTENT, DELIVERY_PATH)
#: The most claim statements kept built (one per number of rows claimed at once).
_CLAIM_SHAPES = 32

_LOCK_SESSION = select(sessions.c.id).where(sessions.c.id == bindparam("session")).with_for_update()


async def lock_session(conn: AsyncConnection, session_id: str) -> bool:
    """Serialize against prompt admission on PostgreSQL: a newer turn cannot be admitted
    between the state check and the claim. SQLite's write lock already does (every write
    transaction begins ``IMMEDIATE``, so what it read was already final): no statement.
    ``True`` when a lock was taken now (what was read before it may have changed)."""
    if conn.dialect.name == "sqlite":
        return False
    await conn.execute(_LOCK_SESSION, {"session": session_id})
    return True


async def classify_locked(
    conn: AsyncConnection, bundle_id: str, waiters: LiveWaiters, what: str
) -> tuple[BundleFacts, BundleState]:
    """A respond's first step inside its claiming transaction: lock the bundle's session, then
    classify the bundle with the rule. 404 when it has no rows; 409 ``not_active`` with its
    state (the contract's order) unless it is active. ``what`` names it in the messages."""
    facts = await bundle_facts(conn, bundle_id)
    if facts is None:
        raise NotFound(f"no such {what}")
    if await lock_session(conn, facts.session_id):
        facts = await bundle_facts(conn, bundle_id)  # as of the lock
        assert facts is not None
    elsewhere = facts.live_worker in await other_live_workers(conn, [facts.live_worker])
    state = classify_bundle(facts, waiters, held_elsewhere=elsewhere)
    if not state.is_active:
        raise NotActive(f"the {what} is no longer active", state=state.value)
    return facts, state


def _claimable() -> Any:
    """The pending rows of bundle ``bundle`` in the current turn of session ``session``."""
    non_empty_turn = func.nullif(messages.c.turn_id, literal(""))
    return and_(
        messages.c.session_id == bindparam("session"),
        pending_id(messages) == bindparam("bundle"),
        messages.c.type == constant(MessageType.CLARIFICATION_REQUEST.value),
        is_pending_row(messages),
        or_(
            non_empty_turn.is_(None),
            messages.c.turn_id == current_turn_id(bindparam("session")),
        ),
    )


_PENDING_ROWS = select(messages).where(_claimable()).order_by(messages.c.id)


async def pending_rows(conn: AsyncConnection, session_id: str, bundle_id: str) -> list[Any]:
    """The rows a claim would take now (for validating an answer against them)."""
    return list(await conn.execute(_PENDING_ROWS, {"session": session_id, "bundle": bundle_id}))


@lru_cache(maxsize=_CLAIM_SHAPES)
def _claim_statement(count: int) -> Any:
    """The claim of ``count`` rows: row ``claim_id_<i>`` gets the patch ``claim_patch_<i>``."""
    new_metadata = case(
        *(
            (
                messages.c.id == bindparam(f"claim_id_{i}"),
                json_merge(messages.c.metadata, patch_param(f"claim_patch_{i}")),
            )
            for i in range(count)
        ),
        else_=messages.c.metadata,
    )
    return (
        update(messages)
        .where(_claimable(), messages.c.id.in_(bindparam("claim_ids", expanding=True)))
        .values(metadata=new_metadata)
        .returning(*messages.c)
    )


async def claim(
    conn: AsyncConnection,
    session_id: str,
    bundle_id: str,
    patches: Mapping[str, dict[str, Any]],
    intent_id: str,
    path: str,
) -> list[dict[str, Any]]:
    """Claim exactly the pending rows named in ``patches`` (message id → its terminal fields)."""
    if not patches:
        return []
    stamp = {DELIVERY_INTENT: intent_id, DELIVERY_PATH: path, **owner_stamp(INTENT_WORKER_KEY)}
    params: dict[str, Any] = {
        "session": session_id,
        "bundle": bundle_id,
        "claim_ids": list(patches),
    }
    for i, (message_id, patch) in enumerate(patches.items()):
        params[f"claim_id_{i}"] = message_id
        params[f"claim_patch_{i}"] = {**patch, **stamp}
    result = await conn.execute(_claim_statement(len(patches)), params)
    return [dict(row._mapping) for row in result]


def _holding() -> Any:
    """The rows of bundle ``bundle`` holding the intent ``intent``."""
    return and_(
        pending_id(messages) == bindparam("bundle"),
        json_text(messages.c.metadata, DELIVERY_INTENT) == bindparam("intent"),
    )


def _merge_held(patch: dict[str, Any]) -> Any:
    """``patch`` merged into the held rows, returning them."""
    return (
        update(messages)
        .where(_holding())
        .values(metadata=json_merge(messages.c.metadata, patch))
        .returning(*messages.c)
    )


_FINALIZE = _merge_held({DELIVERY_INTENT: None, DELIVERY_PATH: None})
_RESTORE = _merge_held({"status": RequestStatus.PENDING.value, **dict.fromkeys(_CLAIM_KEYS)})


async def _merged(
    conn: AsyncConnection, stmt: Any, bundle_id: str, intent_id: str
) -> list[dict[str, Any]]:
    result = await conn.execute(stmt, {"bundle": bundle_id, "intent": intent_id})
    return [dict(row._mapping) for row in result]


async def finalize(conn: AsyncConnection, bundle_id: str, intent_id: str) -> list[dict[str, Any]]:
    """Retire the intent: the claimed rows become plain terminal history."""
    return await _merged(conn, _FINALIZE, bundle_id, intent_id)


async def confirm_live(
    conn: AsyncConnection, waiter: LiveWaiter, intent_id: str
) -> list[dict[str, Any]]:
    """A live waiter's durable confirmation of a handed-over response: the intent retires
    (:func:`finalize`) and the agent goes on with its turn (``RUNNING``, only while that turn
    is still open at the waiter's generation). Empty when a release won first."""
    rows = await finalize(conn, waiter.pending_id, intent_id)
    if rows:
        await set_state_for_generation(
            conn,
            waiter.session_id,
            waiter.prompt_generation,
            SessionState.RUNNING,
            while_open=waiter.turn_id,
        )
    return rows


async def restore(conn: AsyncConnection, bundle_id: str, intent_id: str) -> list[dict[str, Any]]:
    """Put the claimed rows back to pending, exactly as before the claim."""
    return await _merged(conn, _RESTORE, bundle_id, intent_id)


@dataclass(frozen=True, slots=True)
class Released:
    """What releasing an unhanded claim did: ``restored`` (pending again, the same answer may
    be sent) or retired as terminal history (its turn is no longer current)."""

    rows: list[dict[str, Any]]
    restored: bool


_HELD_TURNS = (
    select(
        messages.c.turn_id,
        sessions.c.state,
        current_turn_id(messages.c.session_id).label("current"),
    )
    .join(sessions, sessions.c.id == messages.c.session_id)
    .where(_holding())
)
_IDLE_WAITS = (
    update(sessions)
    .where(
        sessions.c.id == bindparam("session"),
        sessions.c.state == SessionState.IDLE.value,
    )
    .values(state=SessionState.WAITING_FOR_INPUT.value)
)


async def release(conn: AsyncConnection, bundle_id: str, intent_id: str) -> Released:
    """A claim whose answer certainly never reached the agent: restore it while its turn is
    still the session's current turn and the session is live; otherwise retire the intent,
    leaving the rows terminal (history is never reactivated, a superseded answer not re-armed).
    """
    held = (await conn.execute(_HELD_TURNS, {"bundle": bundle_id, "intent": intent_id})).all()
    current = bool(held) and all(
        row.state not in TERMINAL_SESSION_STATES and (not row.turn_id or row.turn_id == row.current)
        for row in held
    )
    if current:
        rows = await restore(conn, bundle_id, intent_id)
        if rows:
            # An idle session whose question is answerable again is waiting for input (a
            # ready event may have settled it while the claim was held).
            await conn.execute(_IDLE_WAITS, {"session": rows[0]["session_id"]})
        return Released(rows, restored=True)
    return Released(await finalize(conn, bundle_id, intent_id), restored=False)


_INTENT = json_text(messages.c.metadata, DELIVERY_INTENT)
_HELD_INTENTS = (
    select(pending_id(messages), _INTENT)
    .where(messages.c.id.in_(bindparam("message_ids", expanding=True)), _INTENT.is_not(None))
    .distinct()
)


async def held_intents(conn: AsyncConnection, message_ids: list[str]) -> list[tuple[str, str]]:
    """``(pending_id, intent_id)`` of the claims still held by any of the rows ``message_ids``."""
    result = await conn.execute(_HELD_INTENTS, {"message_ids": list(message_ids)})
    return [(bundle, held) for bundle, held in result]


async def release_messages(conn: AsyncConnection, message_ids: list[str]) -> Released:
    """:func:`release` every claim still held on ``message_ids`` (a rolled-back reservation's
    claimed rows); ``restored`` when there was one and all of it is pending again."""
    held = await held_intents(conn, message_ids)
    rows: list[dict[str, Any]] = []
    restored = bool(held)
    for bundle, intent in held:
        released = await release(conn, bundle, intent)
        rows.extend(released.rows)
        restored = restored and released.restored
    return Released(rows, restored)


async def retire_messages(conn: AsyncConnection, message_ids: list[str]) -> list[dict[str, Any]]:
    """Retire every claim still held on ``message_ids``: the answer may have left."""
    rows: list[dict[str, Any]] = []
    for bundle, intent in await held_intents(conn, message_ids):
        rows.extend(await finalize(conn, bundle, intent))
    return rows


_CANCEL = (
    update(messages)
    .where(_claimable())
    .values(metadata=json_merge(messages.c.metadata, {"status": RequestStatus.CANCELLED.value}))
    .returning(*messages.c)
)


async def cancel(conn: AsyncConnection, session_id: str, bundle_id: str) -> list[dict[str, Any]]:
    """Cancel the bundle's claimable rows (no intent: cancellation is terminal at once)."""
    result = await conn.execute(_CANCEL, {"session": session_id, "bundle": bundle_id})
    return [dict(row._mapping) for row in result]


_IS_CLAIMED = (
    select(messages.c.id)
    .where(pending_id(messages) == bindparam("bundle"), _INTENT.is_not(None))
    .limit(1)
)


async def is_claimed(conn: AsyncConnection, bundle_id: str) -> bool:
    """Whether a response holds a delivery intent on any row of the bundle."""
    return (await conn.execute(_IS_CLAIMED, {"bundle": bundle_id})).first() is not None
