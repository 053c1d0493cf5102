"""The pending-action projection is one statement however many sessions it covers."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event, insert
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import session_authority, session_pending_actions, task_pending_actions
from backend.db.engine import read_tx, write_tx
from backend.db.tables import sessions, tasks
from backend.ids import new_id
from backend.models import (
    MessageType,
    PendingAction,
    SessionState,
    TaskSession,
    TaskSessionMessage,
    TaskSessionTurn,
)
from backend.projections.revision import LocalRevisionClock
from backend.projections.sessions import project_sessions
from tests.support.builders import World, at


@contextmanager
def counted_statements(engine: AsyncEngine) -> Iterator[list[str]]:
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        if not statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


async def _bulk_sessions(engine: AsyncEngine, world: World, count: int) -> tuple[str, dict]:
    """``count`` sessions on one task; every third has a current-turn question."""
    task = await world.task()
    session_rows, turn_rows, message_rows = [], [], []
    expected: dict[str, PendingAction | None] = {}
    for i in range(count):
        sid, old, new = new_id(), new_id(), new_id()
        session_rows.append(
            {
                "id": sid,
                "task_id": task,
                "state": SessionState.IDLE.value,
                "is_primary": i == 0,
                "agent_profile": "mock",
                "prompt_generation": 2,
                "pending_action": None,
                "created_at": at(i),
                "updated_at": at(i),
            }
        )
        for turn_id, started in ((old, 1), (new, 2)):
            turn_rows.append(
                {
                    "id": turn_id,
                    "session_id": sid,
                    "task_id": task,
                    "prompt_generation": started,
                    "started_at": at(started),
                    "created_at": at(started),
                    "metadata": {},
                }
            )
        # Superseded history everywhere; a current question on every third session.
        question_turn = new if i % 3 == 0 else old
        message_rows.append(
            {
                "id": new_id(),
                "session_id": sid,
                "task_id": task,
                "turn_id": question_turn,
                "type": MessageType.CLARIFICATION_REQUEST.value,
                "author": "agent",
                "content": "?",
                "metadata": {"pending_id": new_id(), "status": "pending"},
                "created_at": at(3),
            }
        )
        expected[sid] = PendingAction.CLARIFICATION if i % 3 == 0 else None
    async with write_tx(engine) as conn:
        await conn.execute(insert(TaskSession.__table__), session_rows)
        await conn.execute(insert(TaskSessionTurn.__table__), turn_rows)
        await conn.execute(insert(TaskSessionMessage.__table__), message_rows)
    return task, expected


async def test_projection_statement_count_does_not_grow_with_sessions(engine):
    world = World(engine)
    small_task, small_expected = await _bulk_sessions(engine, world, 10)
    large_task, large_expected = await _bulk_sessions(engine, world, 1000)

    async with read_tx(engine) as conn:
        with counted_statements(engine) as small_statements:
            small = await session_authority(conn, sessions.c.task_id == small_task)
            small_tasks = await task_pending_actions(conn, tasks.c.id == small_task)
        with counted_statements(engine) as large_statements:
            large = await session_authority(conn, sessions.c.task_id == large_task)
            large_tasks = await task_pending_actions(conn, tasks.c.id == large_task)
            large_sessions = await session_pending_actions(conn, sessions.c.task_id == large_task)

    assert {s.session_id: s.pending_action for s in small} == small_expected
    assert {s.session_id: s.pending_action for s in large} == large_expected
    assert large_sessions == {sid: a for sid, a in large_expected.items() if a is not None}
    assert small_tasks == {small_task: PendingAction.CLARIFICATION}
    assert large_tasks == {large_task: PendingAction.CLARIFICATION}
    assert len(small_statements) == 2
    assert len(large_statements) == 3


async def test_task_pending_action_takes_the_strongest_session_action(engine):
    world = World(engine)
    task = await world.task()
    clean = await world.session(task)
    await world.turn(clean, started=1)
    permission = await world.session(task, is_primary=False)
    turn = await world.turn(permission, started=1)
    await world.question(permission, turn, type_=MessageType.PERMISSION_REQUEST)
    other_task = await world.task()
    await world.session(other_task)

    both = tasks.c.id.in_([task, other_task])
    async with read_tx(engine) as conn:
        assert await task_pending_actions(conn, both) == {task: PendingAction.PERMISSION}

    asking = await world.session(task, is_primary=False)
    turn = await world.turn(asking, started=1)
    await world.question(asking, turn)
    async with read_tx(engine) as conn:
        assert await task_pending_actions(conn, both) == {task: PendingAction.CLARIFICATION}


async def test_projection_revision_is_reserved_before_the_read(engine):
    world = World(engine)
    session = await world.session()
    clock = LocalRevisionClock(epoch=7)
    first = await project_sessions(engine, clock, sessions.c.id == session)
    second = await project_sessions(engine, clock, sessions.c.id == session)
    assert first.revision < second.revision
    assert first.revision.epoch == second.revision.epoch == 7
    assert [s.session_id for s in second.sessions] == [session]
