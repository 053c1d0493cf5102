"""The workflow guard: a task may not leave its step while a clarification is active.

"Active" is decided by the one repository rule (:mod:`backend.authority`): a bundle of the
session's current turn with a pending row, no claimed delivery and a live session. So a
detached question whose turn is still current blocks (S01), a question superseded by a newer
turn does not (S02), and neither does an answered, skipped or expired one (S07). Only
clarifications block; a pending *permission* request does not.

The guard fails closed: when the active-state read fails, :class:`GuardUnavailable` (503)
is raised and the caller must not move the task.

Callers run the guard inside the same write transaction as the move, after
:func:`lock_task_for_move` (see there for why that is enough on both databases).
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend import failpoints
from backend.authority import Scope, session_pending_actions
from backend.db.json import json_text
from backend.db.tables import messages, sessions, tasks
from backend.errors import Conflict, DomainError
from backend.request_evidence import DELIVERY_INTENT
from backend.vocabulary import MessageType, PendingAction

log = logging.getLogger(__name__)

#: Fault point hit right before the guard's active-state read (``error`` makes the read fail).
GUARD_FAILPOINT = "workflow.guard"


class ClarificationPending(Conflict):
    """A session of the task has an active clarification; the task stays in its step."""

    code = "clarification_pending"


class GuardUnavailable(DomainError):
    """The active-state read failed, so nobody knows whether a question is pending: the move
    is refused (fail closed) and may be retried."""

    status = 503
    code = "guard_unavailable"


#: The move lock's two statements (every completed turn takes it), built once.
_LOCK_TASK = select(tasks).where(tasks.c.id == bindparam("task")).with_for_update(key_share=True)
_LOCK_SESSIONS = (
    select(sessions.c.id)
    .where(sessions.c.task_id == bindparam("task"))
    .order_by(sessions.c.id)
    .with_for_update(key_share=True)
)


async def lock_task_for_move(conn: AsyncConnection, task_id: str) -> Any:
    """Lock the task row and its sessions for the rest of the write transaction; returns the
    task row (``None`` when there is no such task).

    Why this makes the guard's verdict hold until the move commits:

    - **SQLite**: the caller's :func:`~backend.db.engine.write_tx` runs ``BEGIN IMMEDIATE``, so
      the transaction holds the database write lock from its first statement; no clarification
      can be stored, claimed or restored and no turn admitted between the guard's read and the
      move's update. ``FOR UPDATE`` renders as nothing there.
    - **PostgreSQL** (READ COMMITTED): the task row is locked ``FOR NO KEY UPDATE`` (two moves of
      one task serialize, so the no-op check and the guard see the other's result), then every
      session row of the task in id order, also ``FOR NO KEY UPDATE``. That lock conflicts with
      the session lock respond takes (:func:`backend.clarifications.claims.lock_session`,
      ``FOR UPDATE``) and with the session ``UPDATE`` that every bundle-storing, prompt-admitting
      or state-changing transaction performs (storing a bundle sets ``WAITING_FOR_INPUT`` in the
      same transaction). So such a transaction either committed before the lock was granted —
      and the guard, a later statement with a fresh snapshot, sees it — or waits until the move
      committed, which then orders it after the move (a clarification may arise in the new
      step; it only stops the task from leaving again). ``NO KEY UPDATE`` rather than
      ``UPDATE`` keeps foreign-key inserts (new sessions, turns and messages take ``KEY SHARE``)
      unblocked. Lock order is always task, then sessions by id; no other transaction locks
      a task row, so the order cannot deadlock with the single-session lockers.

    A session created after the lock has no current turn with a question yet; its first bundle
    needs a later transaction that updates that session, which the ordering above covers.
    """
    task = (await conn.execute(_LOCK_TASK, {"task": task_id})).first()
    if task is None:
        return None
    if conn.dialect.name != "sqlite":  # SQLite: the write lock holds already, no statement
        await conn.execute(_LOCK_SESSIONS, {"task": task_id})
    return task


async def blocking_sessions(conn: AsyncConnection, task_id: str) -> list[str]:
    """Ids of the task's sessions that have an active clarification (by the repository rule)
    or a response claim in flight (a question that may become active again).

    Raises :class:`GuardUnavailable` when the read fails.
    """
    try:
        await failpoints.hit(GUARD_FAILPOINT)
        actions = await session_pending_actions(conn, Scope.task(task_id))
        claimed = await sessions_with_held_claims(conn, task_id)
    except Exception as error:
        log.warning("workflow guard of task %s could not read active state: %r", task_id, error)
        raise GuardUnavailable(
            "the workflow guard could not read the task's clarification state; try again"
        ) from error
    active = {sid for sid, action in actions.items() if action is PendingAction.CLARIFICATION}
    return sorted(active | claimed)


async def sessions_with_held_claims(conn: AsyncConnection, task_id: str) -> set[str]:
    """Sessions of the task where a response holds a delivery intent: the answer is on its way
    but may still be restored (then the question is active again), so it blocks like one."""
    stmt = (
        select(messages.c.session_id)
        .join(sessions, sessions.c.id == messages.c.session_id)
        .where(
            sessions.c.task_id == task_id,
            messages.c.type == MessageType.CLARIFICATION_REQUEST.value,
            json_text(messages.c.metadata, DELIVERY_INTENT).is_not(None),
        )
        .distinct()
    )
    return {row.session_id for row in await conn.execute(stmt)}


async def assert_can_leave_step(conn: AsyncConnection, task_id: str) -> None:
    """Raise unless the task may leave its current step now.

    :class:`ClarificationPending` (409) while any session of the task has an active
    clarification; :class:`GuardUnavailable` (503) when that cannot be read. Run it in the
    write transaction that moves the task, after :func:`lock_task_for_move`. The orchestrator's
    on-turn-complete transitions are meant to call this same function.
    """
    blocking = await blocking_sessions(conn, task_id)
    if blocking:
        raise ClarificationPending(
            "a session of this task is waiting for an answer to a clarification",
            session_ids=blocking,
        )
