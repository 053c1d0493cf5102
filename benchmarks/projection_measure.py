"""The projection benchmark's measurement: check the repository against the reference, then
time it against the very same statement on the bare driver.

The comparison is only fair if both sides run one statement: the raw side's SQL is captured
from ``task_pending_actions`` itself (with a stand-in connection) and compiled with literal
binds, so any gap between the two is the repository's own overhead (transaction, bound
parameters, row mapping), not a different query.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event, select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import (
    session_authority,
    session_pending_actions,
    task_pending_actions,
)
from backend.db.engine import create_engine, read_tx
from backend.db.tables import sessions
from backend.models import Task
from benchmarks.dataset import Data
from benchmarks.reference import Expected, compare

RANK_ACTION = {0: "clarification", 1: "permission"}

tasks_table = Task.__table__  # type: ignore[attr-defined]


def task_list_where(workspace_id: str) -> Any:
    """The task list's filter: every task in the workspace."""
    return tasks_table.c.workspace_id == workspace_id


def workspace_sessions_where(workspace_id: str) -> Any:
    """Every session of every task in the workspace (for the untimed correctness check)."""
    return sessions.c.task_id.in_(select(tasks_table.c.id).where(task_list_where(workspace_id)))


class _CapturingConnection:
    """Stands in for an AsyncConnection to capture the statement ``task_pending_actions``
    builds."""

    statement: Any = None

    async def execute(self, statement: Any) -> list[Any]:
        self.statement = statement
        return []


async def authority_sql(engine: AsyncEngine, workspace_id: str) -> str:
    """The exact statement of ``task_pending_actions``, compiled with literal binds."""
    capture = _CapturingConnection()
    await task_pending_actions(capture, task_list_where(workspace_id))  # type: ignore[arg-type]
    compiled = capture.statement.compile(
        dialect=engine.dialect, compile_kwargs={"literal_binds": True}
    )
    return str(compiled)


@dataclass
class Timings:
    """Interleaved milliseconds, pair by pair, so a ratio can be taken per run."""

    repository: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)


async def repository_run(
    engine: AsyncEngine, workspace_id: str
) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """Untimed correctness run: every session's authority, session actions, task actions."""
    async with read_tx(engine) as conn:
        rows = await session_authority(conn, workspace_sessions_where(workspace_id))
        per_session = await session_pending_actions(conn, workspace_sessions_where(workspace_id))
        per_task = await task_pending_actions(conn, task_list_where(workspace_id))
    return rows, per_session, per_task


def by_session_repository(rows: list[Any]) -> dict[str, tuple[str | None, str | None]]:
    """The repository's rows in the reference's shape: session -> (current turn, action)."""
    return {
        r.session_id: (r.current_turn_id, r.pending_action.value if r.pending_action else None)
        for r in rows
    }


def expected_none_or(action: Any) -> str | None:
    """A ``PendingAction`` (or none) as the reference spells it."""
    return action.value if action is not None else None


def by_task_raw(rows: list[tuple[Any, ...]]) -> dict[str, str | None]:
    """The raw statement's ``(task_id, rank)`` rows in the reference's shape."""
    return {r[0]: RANK_ACTION.get(r[1]) for r in rows}


@dataclass
class RawDriver:
    """The sync driver connection the raw statement runs on."""

    #: Execute a statement and fetch every row.
    fetch: Callable[[str], list[tuple[Any, ...]]]
    #: The detailed plan (EXPLAIN QUERY PLAN / EXPLAIN ANALYZE) of a literal statement.
    explain: Callable[[str], list[str]]
    #: The bare plan of a statement with optional driver parameters, for comparisons.
    plan: Callable[[str, Any], list[str]]


def _capture_bound(engine: AsyncEngine, into: list[tuple[str, Any]]) -> Callable[..., None]:
    """Record the reads the engine sends, with their bound parameters, for ``--explain``."""

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("WITH", "SELECT")):
            into.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    return record


async def measure(
    name: str,
    url: str,
    driver: RawDriver,
    data: Data,
    expected: Expected,
    args: argparse.Namespace,
) -> tuple[Timings, list[str], Counter[str]]:
    """Verify, optionally explain, then time one database: ``(timings, problems, counts)``.

    Nothing is timed once a result is wrong: the problems are returned instead.
    """
    engine = create_engine(url)
    try:
        sql = await authority_sql(engine, data.workspace_id)
        # Correctness first: the repository, the raw statement and the reference must agree.
        bound: list[tuple[str, Any]] = []
        listener = _capture_bound(engine, bound)
        try:
            rows, per_session, per_task = await repository_run(engine, data.workspace_id)
        finally:
            event.remove(engine.sync_engine, "before_cursor_execute", listener)
        got = by_session_repository(rows)
        problems = compare(f"{name} repository", got, expected.session, data)
        session_expected = {sid: a for sid, (_, a) in expected.session.items() if a is not None}
        if {k: v.value for k, v in per_session.items()} != session_expected:
            problems.append(f"{name}: session_pending_actions differs from the reference")
        task_got = {k: expected_none_or(per_task.get(k)) for k in expected.task}
        raw_tasks = by_task_raw(driver.fetch(sql))
        raw_got = {k: raw_tasks.get(k) for k in expected.task}
        for label, result in (("task_pending_actions", task_got), ("raw SQL", raw_got)):
            if result != expected.task:
                diff = sum(1 for k in expected.task if result.get(k) != expected.task[k])
                problems.append(f"{name}: {label} differs from the reference on {diff} tasks")
        counts = Counter(a for _, a in got.values())
        counts.update(f"task:{a}" for a in task_got.values())
        if problems:
            return Timings(), problems, counts
        if args.explain:
            print(f"\n--- {name}: query plan of the statement (literal binds) ---")
            for line in driver.explain(sql):
                print(line)
            if bound:
                # The repository sends bound parameters; a planner may pick another plan then
                # (e.g. a partial index whose predicate it can no longer prove).
                own = driver.plan(*bound[-1])  # task_pending_actions runs last
                same = own == driver.plan(sql, None)
                print(
                    "--- the repository's own statement (bound parameters): "
                    + ("same plan ---" if same else "DIFFERENT plan: ---")
                )
                if not same:
                    for line in own:
                        print(line)
            print(f"--- end of {name} plan ---\n")
        where = task_list_where(data.workspace_id)
        for _ in range(args.warmup):
            async with read_tx(engine) as conn:
                await task_pending_actions(conn, where)
            driver.fetch(sql)
        timings = Timings()
        for _ in range(args.repeat):  # interleaved, so drift hits both sides alike
            start = time.perf_counter()
            async with read_tx(engine) as conn:
                await task_pending_actions(conn, where)
            timings.repository.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            driver.fetch(sql)
            timings.raw.append((time.perf_counter() - start) * 1000)
        return timings, [], counts
    finally:
        await engine.dispose()
