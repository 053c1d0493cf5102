"""Async reads that apply the rule; each is one SQL statement whatever the number of rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, case, func, literal, select, true
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Subquery

from backend.authority import sql as q
from backend.authority.bundles import BundleFacts
from backend.authority.scope import Where, prepared
from backend.db.json import json_flag, json_text
from backend.db.tables import messages, sessions, turns
from backend.request_evidence import is_pending_row, is_request
from backend.request_evidence import pending_id as pending_id_of
from backend.vocabulary import PendingAction
from backend.workers import WORKER_KEY


@dataclass(frozen=True, slots=True)
class SessionAuthority:
    """One session's authoritative projection inputs."""

    session_id: str
    task_id: str
    state: str
    current_turn_id: str | None
    pending_action: PendingAction | None


@dataclass(frozen=True, slots=True)
class TurnView:
    id: str
    session_id: str
    started_at: datetime
    completed_at: datetime | None
    created_at: datetime


async def current_turn_ids(conn: AsyncConnection, session_ids: list[str]) -> dict[str, str | None]:
    """The current turn of each session (``None`` when it has no authoritative turn)."""
    if not session_ids:
        return {}
    s = sessions
    stmt = select(s.c.id, q.current_turn_id(s.c.id)).where(s.c.id.in_(session_ids))
    return {row[0]: row[1] for row in await conn.execute(stmt)}


def _session_authority_stmt(sessions_where: ColumnElement[bool]) -> Any:
    s = sessions
    active = q.active_bundles_of(sessions_where)
    best = (
        select(active.c.session_id, func.min(active.c.rank).label("rank"))
        .group_by(active.c.session_id)
        .subquery("best")
    )
    return (
        select(s.c.id, s.c.task_id, s.c.state, q.current_turn_id(s.c.id), best.c.rank)
        .select_from(s.outerjoin(best, best.c.session_id == s.c.id))
        .where(sessions_where)
        .order_by(s.c.id)
    )


async def session_authority(conn: AsyncConnection, sessions_where: Where) -> list[SessionAuthority]:
    """Current turn and ``pending_action`` of every session matching ``sessions_where``.

    Meant for a task's session list (a handful of rows); for whole task lists, use
    :func:`task_pending_actions`, which never computes turns of sessions without open requests.
    """
    stmt, params = prepared(_session_authority_stmt, sessions_where)
    return [
        SessionAuthority(sid, task_id, state, turn_id, q.RANKED_ACTIONS.get(rank))
        for sid, task_id, state, turn_id, rank in await conn.execute(stmt, params)
    ]


def _session_actions_stmt(sessions_where: ColumnElement[bool]) -> Any:
    active = q.active_bundles_of(sessions_where)
    return select(active.c.session_id, func.min(active.c.rank)).group_by(active.c.session_id)


async def session_pending_actions(
    conn: AsyncConnection, sessions_where: Where
) -> dict[str, PendingAction]:
    """``pending_action`` of the matching sessions that have one (absent means none)."""
    stmt, params = prepared(_session_actions_stmt, sessions_where)
    return {sid: q.RANKED_ACTIONS[rank] for sid, rank in await conn.execute(stmt, params)}


def _task_actions_stmt(tasks_where: ColumnElement[bool]) -> Any:
    active = q.active_bundles_of(tasks_where)
    return select(active.c.task_id, func.min(active.c.rank)).group_by(active.c.task_id)


async def task_pending_actions(
    conn: AsyncConnection, tasks_where: Where
) -> dict[str, PendingAction]:
    """Task-level ``pending_action`` of the matching tasks that have one (absent means none):
    the strongest action of any of the task's sessions, folded in SQL."""
    stmt, params = prepared(_task_actions_stmt, tasks_where)
    return {task_id: q.RANKED_ACTIONS[rank] for task_id, rank in await conn.execute(stmt, params)}


def _bundle_facts_query(rows_where: Callable[[Any], ColumnElement[bool]]) -> Subquery:
    """One row of :class:`BundleFacts` columns per bundle whose rows match ``rows_where``."""
    row = messages.alias("bundle_row")
    agg = q.bundle_aggregates(row)
    pid = pending_id_of(row)
    bundle = (
        select(
            row.c.session_id,
            pid.label("pending_id"),
            row.c.type,
            *(expr.label(name) for name, expr in agg.items()),
            _live_worker(row).label("live_worker"),
        )
        .where(is_request(row), rows_where(row), pid.is_not(None))
        .group_by(row.c.session_id, pid, row.c.type)
        .subquery("bundle")
    )
    s = sessions
    with_turn = (
        select(
            bundle,
            s.c.task_id,
            s.c.state.label("session_state"),
            q.current_turn_id(bundle.c.session_id).label("current_turn_id"),
        )
        .join(s, s.c.id == bundle.c.session_id)
        .subquery("with_turn")
    )
    agg_cols = {name: with_turn.c[name] for name in agg}
    is_active = q.is_active_bundle(agg_cols, with_turn.c.current_turn_id, with_turn.c.session_state)
    return select(
        with_turn, case((is_active, true()), else_=literal(False)).label("is_active")
    ).subquery("bundle_facts")


def _live_worker(row: Any) -> ColumnElement[Any]:
    """The worker whose waiter holds the bundle's still-waiting rows: the stamp of the
    worker that stored it, until the bundle is detached (or answered)."""
    waiting = case(
        (
            is_pending_row(row) & ~json_flag(row.c.metadata, "agent_disconnected"),
            json_text(row.c.metadata, WORKER_KEY),
        ),
        else_=None,
    )
    return func.max(waiting)


def _facts(r: Any) -> BundleFacts:
    identity = r.turn_min if r.turn_min is not None and r.turn_min == r.turn_max else None
    return BundleFacts(
        pending_id=r.pending_id,
        session_id=r.session_id,
        task_id=r.task_id,
        request_type=r.type,
        turn_id=identity,
        current_turn_id=r.current_turn_id,
        session_state=r.session_state,
        pending_rows=int(r.pending_rows or 0),
        intent_rows=int(r.intent_rows or 0),
        row_count=int(r.row_count),
        is_active=bool(r.is_active),
        live_worker=r.live_worker,
    )


def _prebuilt_bundle_facts() -> tuple[Any, Any]:
    """The two bundle reads of the answer path, built once (see :mod:`.scope` for why)."""
    by_pending_id = _bundle_facts_query(lambda row: pending_id_of(row) == bindparam("pending_id"))
    of_session = _bundle_facts_query(lambda row: row.c.session_id == bindparam("session_id"))
    return (
        # Pending ids are unique per bundle; should one span sessions, pick deterministically.
        select(by_pending_id).order_by(by_pending_id.c.session_id),
        select(of_session).where(of_session.c.is_active).order_by(of_session.c.pending_id),
    )


_BUNDLE_FACTS, _ACTIVE_BUNDLES = _prebuilt_bundle_facts()


async def bundle_facts(conn: AsyncConnection, pending_id: str) -> BundleFacts | None:
    """Everything the state machine needs about one bundle, or ``None`` if it has no rows."""
    result = (await conn.execute(_BUNDLE_FACTS, {"pending_id": pending_id})).first()
    return _facts(result) if result is not None else None


async def active_bundles(conn: AsyncConnection, session_id: str) -> list[BundleFacts]:
    """The session's operational bundles (what a chat overlay may show)."""
    return [_facts(r) for r in await conn.execute(_ACTIVE_BUNDLES, {"session_id": session_id})]


async def visible_turns(conn: AsyncConnection, session_id: str) -> list[TurnView]:
    """Client-visible turn history, oldest first; unpublished reservations stay hidden until
    published or referenced by a message, even when an attempt marker makes them current."""
    t = turns
    stmt = (
        select(t.c.id, t.c.session_id, t.c.started_at, t.c.completed_at, t.c.created_at)
        .where(t.c.session_id == session_id, q.is_visible(t))
        .order_by(*q.oldest_first(t))
    )
    return [TurnView(*r) for r in await conn.execute(stmt)]
