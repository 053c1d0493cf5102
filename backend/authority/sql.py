"""SQL building blocks of the rule, shared by every query in :mod:`backend.authority`.

Written with SQLAlchemy Core so one definition renders for SQLite and PostgreSQL, and so the
batched forms stay single statements (correlated subqueries, no per-session round trips).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
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
from sqlalchemy.sql.selectable import Subquery

from backend.db.json import json_flag
from backend.db.tables import messages, sessions, tasks, turns
from backend.request_evidence import (
    has_delivery_intent,
    is_open_request,
    is_pending_row,
    pending_id,
)
from backend.vocabulary import TERMINAL_SESSION_STATES, MessageType, PendingAction, TurnMarker

TERMINAL_STATES = tuple(sorted(state.value for state in TERMINAL_SESSION_STATES))

# Keys of turn metadata written by prompt reservation (see the spec's Data model).
DISPATCH_PENDING = TurnMarker.DISPATCH_PENDING.value
DISPATCH_ATTEMPTED = "prompt_dispatch_attempted"


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


#: The turn table as :func:`current_turn_id` reads it. Built once: an alias copies every column
#: of its table, and the rule's subquery is part of nearly every statement on the answer path.
#: Only :func:`current_turn_id` may use it, so it never appears in an enclosing FROM (which
#: would correlate the subquery away).
_AUTHORITY_TURN = turns.alias("authority_turn")
_AUTHORITATIVE = is_authoritative(_AUTHORITY_TURN)
_NEWEST_AUTHORITY_FIRST = newest_first(_AUTHORITY_TURN)


def current_turn_id(session_id: ColumnElement[str]) -> Any:
    """Scalar subquery: the session's newest authoritative durable turn (or NULL)."""
    turn = _AUTHORITY_TURN
    return (
        select(turn.c.id)
        .where(turn.c.session_id == session_id, _AUTHORITATIVE)
        .order_by(*_NEWEST_AUTHORITY_FIRST)
        .limit(1)
        .scalar_subquery()
    )


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


#: Lower rank wins: a clarification outranks a permission request on the same session.
ACTION_RANKS: dict[str, int] = {
    MessageType.CLARIFICATION_REQUEST.value: 0,
    MessageType.PERMISSION_REQUEST.value: 1,
}
RANKED_ACTIONS: dict[int, PendingAction] = {
    0: PendingAction.CLARIFICATION,
    1: PendingAction.PERMISSION,
}


def active_bundles_of(scope: ColumnElement[bool]) -> Subquery:
    """One row ``(session_id, task_id, rank)`` per active bundle in ``scope``.

    ``scope`` may use columns of ``sessions`` and ``tasks`` (both are joined by primary key),
    so a whole workspace is a plain ``tasks.c.workspace_id == ...`` and the planner can drive
    the search from the small open-request index instead of from every session.

    Only a row with pending evidence can make a bundle active, so the search starts from the
    small partial index of open request rows rather than from every session's current turn;
    the current turn is computed just for the sessions that have such a row, and the rule's
    predicate then runs over *all* rows of each candidate bundle (siblings with legacy or
    conflicting turn ids, and delivery intents on terminal siblings, count).
    """
    s = sessions
    open_row = messages.alias("open_row")
    open_pid = pending_id(open_row)
    candidates = (
        select(
            open_row.c.session_id,
            open_pid.label("pending_id"),
            open_row.c.type,
            s.c.task_id,
            s.c.state,
            current_turn_id(open_row.c.session_id).label("turn_id"),
        )
        .join(s, s.c.id == open_row.c.session_id)
        .join(tasks, tasks.c.id == s.c.task_id)
        .where(is_open_request(open_row), scope, s.c.state.not_in(TERMINAL_STATES))
        .group_by(open_row.c.session_id, open_pid, open_row.c.type, s.c.task_id, s.c.state)
        .subquery("candidates")
    )
    row = messages.alias("bundle_row")
    rank = case(
        *((candidates.c.type == t, literal(r)) for t, r in ACTION_RANKS.items()),
        else_=literal(len(ACTION_RANKS)),
    )
    return (
        select(candidates.c.session_id, candidates.c.task_id, rank.label("rank"))
        .join(
            row,
            and_(
                pending_id(row) == candidates.c.pending_id,
                row.c.session_id == candidates.c.session_id,
                row.c.type == candidates.c.type,
            ),
        )
        .group_by(
            candidates.c.session_id,
            candidates.c.pending_id,
            candidates.c.type,
            candidates.c.task_id,
            candidates.c.state,
            candidates.c.turn_id,
        )
        .having(is_active_bundle(bundle_aggregates(row), candidates.c.turn_id, candidates.c.state))
        .subquery("active_bundles")
    )
