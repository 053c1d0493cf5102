"""Reads of the rule named by a :class:`Scope` run a statement built once, and answer exactly
what the same read with a plain clause answers (the prebuilt form is only faster)."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import (
    Scope,
    session_authority,
    session_pending_actions,
    task_pending_actions,
)
from backend.authority.repository import _session_authority_stmt
from backend.authority.scope import prepared
from backend.db.engine import read_tx
from backend.db.tables import sessions, tasks
from backend.models import MessageType, PendingAction
from tests.support.builders import World


async def _two_tasks(engine: AsyncEngine) -> tuple[str, str, str, str]:
    """Task A: a session asking a question and a quiet one; task B: a permission request."""
    world = World(engine)
    task_a, task_b = await world.task(), await world.task()
    asking = await world.session(task_a)
    await world.question(asking, await world.turn(asking, started=1))
    quiet = await world.session(task_a, is_primary=False)
    await world.turn(quiet, started=1)
    permission = await world.session(task_b)
    turn = await world.turn(permission, started=1)
    await world.question(permission, turn, type_=MessageType.PERMISSION_REQUEST)
    return task_a, task_b, asking, quiet


async def test_scoped_reads_answer_as_the_clause_reads_do(engine):
    task_a, task_b, asking, quiet = await _two_tasks(engine)
    async with read_tx(engine) as conn:
        for scope, clause in [
            (Scope.session(asking), sessions.c.id == asking),
            (Scope.session(quiet), sessions.c.id == quiet),
            (Scope.task(task_a), sessions.c.task_id == task_a),
            (Scope.task(task_b), sessions.c.task_id == task_b),
        ]:
            assert await session_authority(conn, scope) == await session_authority(conn, clause)
            assert await session_pending_actions(conn, scope) == await session_pending_actions(
                conn, clause
            )
        both = Scope.tasks([task_a, task_b])
        assert await task_pending_actions(conn, both) == {
            task_a: PendingAction.CLARIFICATION,
            task_b: PendingAction.PERMISSION,
        }
        assert await task_pending_actions(conn, both) == await task_pending_actions(
            conn, tasks.c.id.in_([task_a, task_b])
        )
        assert await task_pending_actions(conn, Scope.tasks([task_b])) == {
            task_b: PendingAction.PERMISSION
        }
        (authority,) = await session_authority(conn, Scope.session(asking))
        assert authority.pending_action is PendingAction.CLARIFICATION


async def test_a_scope_kind_builds_its_statement_once(engine):
    task_a, _, asking, quiet = await _two_tasks(engine)
    first, params = prepared(_session_authority_stmt, Scope.session(asking))
    again, other = prepared(_session_authority_stmt, Scope.session(quiet))
    assert again is first
    assert params != other
    by_task, _ = prepared(_session_authority_stmt, Scope.task(task_a))
    assert by_task is not first

    compiled: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        compiled.append(context.compiled.string if context.compiled is not None else statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        async with read_tx(engine) as conn:
            await session_authority(conn, Scope.session(asking))
            await session_authority(conn, Scope.session(quiet))
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)
    reads = [sql for sql in compiled if sql.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 2 and reads[0] == reads[1]
