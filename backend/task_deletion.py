"""Deleting a task: refused while anything durable is still in flight for it, else all of it.

A task owns its sessions, their turns and messages, and its status summary. Deleting it removes
all of those rows in the caller's one write transaction, or nothing at all. It is refused
(409 ``task_busy``) while deletion could lose work or an answer:

- a session of the task is working on a turn: the session is ``CREATED``/``STARTING``/
  ``RUNNING``, or a live (non-terminal) session still has an open turn — the agent is mid-turn,
  possibly holding a live clarification wait;
- a request row carries an unfinished response-delivery intent (an answer is on its way);
- a turn is an unpublished successor reservation (a detached answer being dispatched) or still
  carries the start-event outbox marker that start-up recovery replays.

Refusing is always safe: the caller may retry once the work is done. A pending question that
nobody answered is not work in flight; it goes with the task.

Why the check holds until the delete commits (see also
:func:`backend.workflow.guard.lock_task_for_move`):

- **SQLite**: :func:`~backend.db.engine.write_tx` holds the database write lock from its first
  statement, so nothing can be admitted, claimed or reserved in between.
- **PostgreSQL**: the task row is locked ``FOR UPDATE`` (which also blocks foreign-key inserts of
  new sessions: they take ``KEY SHARE`` on it), then every session row of the task in id order
  ``FOR UPDATE``, which conflicts with respond's session lock, with the session ``UPDATE`` of
  prompt admission and bundle storage, and with the ``KEY SHARE`` of new turn and message rows.
  The lock order (task, then sessions by id) is the workflow move's, so the two cannot deadlock.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, delete, exists, not_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.authority.sql import DISPATCH_PENDING, TERMINAL_STATES
from backend.db.json import json_flag
from backend.db.tables import messages, sessions, summaries, tasks, turns
from backend.errors import Conflict, NotFound
from backend.orchestrator.reservations import START_EVENT_PENDING
from backend.request_evidence import has_delivery_intent
from backend.vocabulary import SessionState

#: Session states in which the agent is (about to be) working on a turn.
WORKING_STATES = (
    SessionState.CREATED.value,
    SessionState.STARTING.value,
    SessionState.RUNNING.value,
)


class TaskBusy(Conflict):
    """Work for the task is still in flight; nothing was deleted."""

    code = "task_busy"


@dataclass(frozen=True, slots=True)
class DeletedTask:
    task_id: str
    workspace_id: str


async def _lock(conn: AsyncConnection, task_id: str) -> str | None:
    """Lock the task row, then its session rows by id; the task's workspace, or ``None``."""
    workspace_id = (
        await conn.execute(
            select(tasks.c.workspace_id).where(tasks.c.id == task_id).with_for_update()
        )
    ).scalar_one_or_none()
    if workspace_id is None:
        return None
    await conn.execute(
        select(sessions.c.id)
        .where(sessions.c.task_id == task_id)
        .order_by(sessions.c.id)
        .with_for_update()
    )
    return str(workspace_id)


async def busy_sessions(conn: AsyncConnection, task_id: str) -> list[str]:
    """Ids of the task's sessions with work in flight (see the module docstring)."""
    of_session = turns.c.session_id == sessions.c.id
    open_turn = exists().where(of_session, turns.c.completed_at.is_(None))
    outstanding_turn = exists().where(
        of_session,
        or_(
            json_flag(turns.c.metadata, DISPATCH_PENDING),
            json_flag(turns.c.metadata, START_EVENT_PENDING),
        ),
    )
    delivering = exists().where(
        messages.c.session_id == sessions.c.id, has_delivery_intent(messages)
    )
    live = not_(sessions.c.state.in_(TERMINAL_STATES))
    rows = await conn.execute(
        select(sessions.c.id)
        .where(
            sessions.c.task_id == task_id,
            or_(
                sessions.c.state.in_(WORKING_STATES),
                and_(live, open_turn),
                outstanding_turn,
                delivering,
            ),
        )
        .order_by(sessions.c.id)
    )
    return [r.id for r in rows]


async def delete_task_rows(conn: AsyncConnection, task_id: str) -> DeletedTask:
    """Delete the task and every row that belongs to it, inside the caller's ``write_tx``.

    Raises :class:`NotFound` when there is no such task and :class:`TaskBusy` (nothing written)
    while work for it is in flight. Visibility is the caller's to check first.
    """
    workspace_id = await _lock(conn, task_id)
    if workspace_id is None:
        raise NotFound("no such task")
    busy = await busy_sessions(conn, task_id)
    if busy:
        raise TaskBusy(
            "the task has work in flight (a turn, an answer being delivered or a resume); "
            "try again when it is done",
            session_ids=busy,
        )
    of_task = select(sessions.c.id).where(sessions.c.task_id == task_id).scalar_subquery()
    await conn.execute(delete(messages).where(messages.c.session_id.in_(of_task)))
    await conn.execute(delete(turns).where(turns.c.session_id.in_(of_task)))
    await conn.execute(delete(sessions).where(sessions.c.task_id == task_id))
    await conn.execute(delete(summaries).where(summaries.c.task_id == task_id))
    await conn.execute(delete(tasks).where(tasks.c.id == task_id))
    return DeletedTask(task_id, workspace_id)
