"""What the boot benchmark does on the bare driver (``sqlite3`` / ``psycopg``), beside the app.

Two things go around the product rather than through it: the **raw baseline**, one hand-written
statement giving the same task list with pending actions (the floor the requests are compared
with), and the **summary rows**, loaded and later made stale directly in
``task_status_summaries``, as a writer that raced the projection would leave them, so that
the requests have something to repair.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.databases import libpq, load_postgres, load_sqlite
from benchmarks.dataset import DAY, Data, pg_time, sqlite_time
from benchmarks.reference import Expected

#: When the loaded summaries were last written (any fixed time after the generated data).
SUMMARY_AT = 200 * DAY
SUMMARY_COLUMNS = (
    "task_status_summaries (task_id, revision, pending_action, primary_session_id, "
    "session_state, updated_at)"
)


# The rule of docs/architecture.md written out by hand: bundles with an open row are the only
# candidates (the partial index ix_messages_open_requests holds exactly those rows), the current
# turn is computed for them alone, and all rows of each candidate bundle decide. The open-row
# predicate is spelled exactly like the partial index's so both databases can use it.
# ``candidates`` is MATERIALIZED (SQLite >= 3.35, PostgreSQL >= 12): inlined, both planners
# evaluated its correlated current-turn subquery once per reference (three), about twice the
# time on PostgreSQL.
_RAW_TASK_LIST = """
WITH open_bundles AS (
    SELECT DISTINCT o.session_id, {pid_o} AS pending_id, o.type
    FROM task_session_messages AS o
    WHERE o.type IN ('clarification_request', 'permission_request')
      AND ({status_o} IS NULL OR {status_o} = 'pending')
),
candidates AS MATERIALIZED (
    SELECT ob.session_id, ob.pending_id, ob.type, s.task_id,
           (SELECT tu.id
              FROM task_session_turns AS tu
             WHERE tu.session_id = ob.session_id
               AND (NOT {dispatch_pending} OR {dispatch_attempted}
                    OR EXISTS (SELECT 1 FROM task_session_messages AS ev
                                WHERE ev.turn_id = tu.id))
             ORDER BY tu.started_at DESC, tu.created_at DESC, tu.id DESC
             LIMIT 1) AS turn_id
    FROM open_bundles AS ob
    JOIN task_sessions AS s ON s.id = ob.session_id
    JOIN tasks AS ct ON ct.id = s.task_id
    WHERE ct.workspace_id = {param}
      AND s.state NOT IN ('CANCELLED', 'COMPLETED', 'FAILED')
),
active AS (
    SELECT c.task_id, c.type
    FROM candidates AS c
    JOIN task_session_messages AS b
      ON {pid_b} = c.pending_id AND b.session_id = c.session_id AND b.type = c.type
    GROUP BY c.session_id, c.pending_id, c.type, c.task_id, c.turn_id
    HAVING min(nullif(b.turn_id, '')) = c.turn_id
       AND max(nullif(b.turn_id, '')) = c.turn_id
       AND sum(CASE WHEN {status_b} IS NULL OR {status_b} = 'pending' THEN 1 ELSE 0 END) > 0
       AND sum(CASE WHEN {intent_b} IS NOT NULL THEN 1 ELSE 0 END) = 0
),
task_action AS (
    SELECT task_id, min(CASE type WHEN 'clarification_request' THEN 0 ELSE 1 END) AS rank
    FROM active
    GROUP BY task_id
)
SELECT t.id, t.workspace_id, t.title, t.workflow_id, t.workflow_step_id, t.state,
       CASE a.rank WHEN 0 THEN 'clarification' WHEN 1 THEN 'permission' END AS pending_action
FROM tasks AS t
LEFT JOIN task_action AS a ON a.task_id = t.id
WHERE t.workspace_id = {param}
ORDER BY t.created_at, t.id
"""


def raw_task_list_sql(dialect: str) -> str:
    """The baseline statement for ``sqlite`` or ``postgresql`` (two workspace parameters)."""
    if dialect == "sqlite":

        def text(column: str, key: str) -> str:
            return f"json_extract({column}, '$.{key}')"

        def flag(column: str, key: str) -> str:
            return f"(coalesce({text(column, key)} IN (1, '1', 'true'), 0) = 1)"

        param = "?"
    else:

        def text(column: str, key: str) -> str:
            return f"({column} ->> '{key}')"

        def flag(column: str, key: str) -> str:
            return f"(coalesce({text(column, key)} IN ('true', '1'), false))"

        param = "%s"
    return _RAW_TASK_LIST.format(
        pid_o=text("o.metadata", "pending_id"),
        status_o=text("o.metadata", "status"),
        dispatch_pending=flag("tu.metadata", "prompt_dispatch_pending"),
        dispatch_attempted=flag("tu.metadata", "prompt_dispatch_attempted"),
        pid_b=text("b.metadata", "pending_id"),
        status_b=text("b.metadata", "status"),
        intent_b=text("b.metadata", "delivery_intent"),
        param=param,
    )


class RawDriver:
    """The bare sync driver beside the product's engine: the baseline statement, plus the
    untimed writes and reads the benchmark needs on ``task_status_summaries``."""

    def __init__(
        self, execute: Callable[[str, Any], Any], dialect: str, close: Callable[[], None]
    ) -> None:
        self._execute = execute
        self._close = close
        self.dialect = dialect
        self.marker = "?" if dialect == "sqlite" else "%s"
        self.sql = raw_task_list_sql(dialect)
        #: Statements the baseline sent (one per task list).
        self.statements = 0

    def task_list(self, workspace_id: str) -> list[tuple[Any, ...]]:
        """The baseline: every task of the workspace with its pending action, rows fetched."""
        self.statements += 1
        return list(self._execute(self.sql, (workspace_id, workspace_id)).fetchall())

    def explain(self, workspace_id: str) -> list[str]:
        """The baseline's plan, for ``--explain``."""
        if self.dialect == "sqlite":
            rows = self._execute("EXPLAIN QUERY PLAN " + self.sql, (workspace_id, workspace_id))
            return [str(r[3]) for r in rows.fetchall()]
        rows = self._execute("EXPLAIN (ANALYZE, BUFFERS) " + self.sql, (workspace_id, workspace_id))
        return [str(r[0]) for r in rows.fetchall()]

    def summaries(self) -> dict[str, str | None]:
        """The stored pending action of every task, read past the app to check a repair."""
        rows = self._execute("SELECT task_id, pending_action FROM task_status_summaries", None)
        return dict(rows.fetchall())

    def make_stale(self, wrong: dict[str, str | None]) -> None:
        """Write wrong actions in one transaction, bumping the revision like a writer would."""
        m = self.marker
        self._execute("BEGIN", None)
        for task_id, action in wrong.items():
            self._execute(
                "UPDATE task_status_summaries SET pending_action = "
                f"{m}, revision = revision + 1 WHERE task_id = {m}",
                (action, task_id),
            )
        self._execute("COMMIT", None)

    def close(self) -> None:
        self._close()


def sqlite_driver(path: Path) -> RawDriver:
    """The baseline's own connection to the SQLite file (autocommit; shared across threads)."""
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return RawDriver(lambda sql, params: con.execute(sql, params or ()), "sqlite", con.close)


def postgres_driver(url: str) -> RawDriver:
    """The baseline's own autocommit connection to the scratch database."""
    con = psycopg.connect(libpq(url), autocommit=True)
    return RawDriver(con.execute, "postgresql", con.close)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Loading: the shared data set, plus one correct summary per task
# --------------------------------------------------------------------------------------------


def summary_rows(data: Data, expected: Expected) -> list[tuple[Any, ...]]:
    """``(task_id, revision, pending_action, primary_session_id, session_state)``, correct."""
    primary = {s[1]: (s[0], s[2]) for s in data.sessions if s[3]}
    return [
        (t[0], 1, expected.task.get(t[0]), *primary.get(t[0], (None, None))) for t in data.tasks
    ]


def load_sqlite_with_summaries(path: Path, data: Data, expected: Expected) -> None:
    """The shared data set, then the summaries, and statistics that include them."""
    load_sqlite(path, data)
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("BEGIN")
        written = sqlite_time(SUMMARY_AT)
        con.executemany(
            f"INSERT INTO {SUMMARY_COLUMNS} VALUES (?, ?, ?, ?, ?, ?)",
            [(*row, written) for row in summary_rows(data, expected)],
        )
        con.execute("COMMIT")
        con.execute("ANALYZE")
    finally:
        con.close()


def load_postgres_with_summaries(url: str, data: Data, expected: Expected) -> None:
    """The shared data set, then the summaries by ``COPY``, and their statistics."""
    load_postgres(url, data)
    with psycopg.connect(libpq(url)) as con:
        written = pg_time(SUMMARY_AT)
        with con.cursor() as cur, cur.copy(f"COPY {SUMMARY_COLUMNS} FROM STDIN") as copy:
            for row in summary_rows(data, expected):
                copy.write_row((*row, written))
        con.commit()
        con.autocommit = True
        con.execute("VACUUM ANALYZE task_status_summaries")
