"""SQL building blocks of the rule, shared by every query in :mod:`backend.authority`.

Written with SQLAlchemy Core so one definition renders for SQLite and PostgreSQL, and so the
batched forms stay single statements (correlated subqueries, no per-session round trips).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Table,
    and_,
    case,
    exists,
    func,
    literal,
    not_,
    or_,
    select,
)
from sqlalchemy.sql.elements import ColumnElement

from backend.db.json import json_flag, json_text
from backend.models import (
    TERMINAL_SESSION_STATES,
    MessageType,
    RequestStatus,
    TaskSession,
    TaskSessionMessage,
    TaskSessionTurn,
)

sessions: Table = TaskSession.__table__  # type: ignore[attr-defined]
turns: Table = TaskSessionTurn.__table__  # type: ignore[attr-defined]
messages: Table = TaskSessionMessage.__table__  # type: ignore[attr-defined]

REQUEST_TYPES = (MessageType.CLARIFICATION_REQUEST.value, MessageType.PERMISSION_REQUEST.value)
TERMINAL_STATES = tuple(sorted(state.value for state in TERMINAL_SESSION_STATES))

# Keys of turn metadata written by prompt reservation (see the spec's Data model).
DISPATCH_PENDING = "prompt_dispatch_pending"
DISPATCH_ATTEMPTED = "prompt_dispatch_attempted"
# Key of message metadata holding an unfinished response-delivery intent.
DELIVERY_INTENT = "delivery_intent"


def has_message_evidence(turn: Any) -> ColumnElement[bool]:
    """A message references the turn: durable proof that it produced output."""
    return exists().where(messages.c.turn_id == turn.c.id)


def is_unpublished(turn: Any) -> ColumnElement[bool]:
    return json_flag(turn.c.metadata, DISPATCH_PENDING)


def is_authoritative(turn: Any) -> ColumnElement[bool]:
    """A turn may own the session: published, or an attempted/evidenced reservation."""
    return or_(
        not_(is_unpublished(turn)),
        json_flag(turn.c.metadata, DISPATCH_ATTEMPTED),
        has_message_evidence(turn),
    )


def is_visible(turn: Any) -> ColumnElement[bool]:
    """A turn clients may see: published, or referenced by a message (attempts stay hidden)."""
    return or_(not_(is_unpublished(turn)), has_message_evidence(turn))


def newest_first(turn: Any) -> tuple[Any, ...]:
    return (turn.c.started_at.desc(), turn.c.created_at.desc(), turn.c.id.desc())


def oldest_first(turn: Any) -> tuple[Any, ...]:
    return (turn.c.started_at.asc(), turn.c.created_at.asc(), turn.c.id.asc())


def current_turn_id(session_id: ColumnElement[str]) -> Any:
    """Scalar subquery: the session's newest authoritative durable turn (or NULL)."""
    turn = turns.alias("authority_turn")
    return (
        select(turn.c.id)
        .where(turn.c.session_id == session_id, is_authoritative(turn))
        .order_by(*newest_first(turn))
        .limit(1)
        .scalar_subquery()
    )


def pending_id(message: Any) -> ColumnElement[str]:
    return json_text(message.c.metadata, "pending_id")


def is_pending_row(message: Any) -> ColumnElement[bool]:
    """Pending evidence on one row. A missing status counts (legacy writers omitted it); turn
    ownership, applied by the bundle predicate, then decides whether that evidence matters."""
    status = json_text(message.c.metadata, "status")
    return or_(status.is_(None), status == RequestStatus.PENDING.value)


def has_delivery_intent(message: Any) -> ColumnElement[bool]:
    return json_text(message.c.metadata, DELIVERY_INTENT).is_not(None)


def bundle_aggregates(message: Any) -> dict[str, ColumnElement[Any]]:
    """Per-bundle facts over all of a bundle's rows (use inside a GROUP BY on the bundle).

    The identity turn is the one non-empty turn id its rows share: legacy empty ids do not mask
    it, and when non-empty ids disagree ``turn_min != turn_max`` makes the bundle inert.
    """
    non_empty_turn = func.nullif(message.c.turn_id, literal(""))
    return {
        "turn_min": func.min(non_empty_turn),
        "turn_max": func.max(non_empty_turn),
        "pending_rows": func.sum(case((is_pending_row(message), 1), else_=0)),
        "intent_rows": func.sum(case((has_delivery_intent(message), 1), else_=0)),
        "row_count": func.count(),
    }


def is_active_bundle(
    agg: dict[str, ColumnElement[Any]],
    current_turn: ColumnElement[Any],
    session_state: ColumnElement[Any],
) -> ColumnElement[bool]:
    """THE rule: a bundle is operational iff it belongs to the current turn of a live session,
    at least one row is still pending and no response has claimed it."""
    return and_(
        agg["turn_min"].is_not(None),
        agg["turn_min"] == agg["turn_max"],
        agg["turn_min"] == current_turn,
        agg["pending_rows"] > 0,
        agg["intent_rows"] == 0,
        session_state.not_in(TERMINAL_STATES),
    )
