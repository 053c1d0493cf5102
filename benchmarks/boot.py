"""Benchmark of ``GET /api/v1/boot`` and ``GET /api/v1/tasks`` at production size.

Both requests return every task with its status summary, and every summary is repaired first
(``backend.projections.summaries``): the pending action is recomputed by the rule in one
statement and each stale summary is rewritten with a compare-and-set. This script measures what
a client waits for, through the real ASGI app in-process (``create_api(runtime)`` behind
``httpx.ASGITransport``, after ``runtime.start()``), on SQLite and/or a scratch PostgreSQL
database, with the data set of ``benchmarks/projection.py`` (same generator, same Python
reference of the rule) plus a correct ``task_status_summaries`` row per task:

* **clean**: no summary is stale, so a request only reads;
* **10% stale**: before each measured request, 10% of the summaries get a wrong
  ``pending_action`` (revision bumped, as a writer would), so the request repairs them;
* **raw SQL**: a hand-written single statement producing the same task list with pending
  actions, run on the bare sync driver (``sqlite3`` / ``psycopg``): the floor to compare with.

Every request is timed and its SQL statements are counted (a ``before_cursor_execute``
listener on ``engine.sync_engine``). Every response is checked against the reference rule,
and after each repair the stored summaries are too. The clean case is run at 1,000 and at
10,000 tasks to show that its statement count does not depend on the number of tasks; the
script exits non-zero when it does, or when any result is wrong. The latency target (boot
under 400 ms on SQLite) is reported as PASS/MISS but never fails the run: timings on a shared
machine are too noisy to gate on.

Run ``python -m benchmarks.boot --help``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.agentctl.client import PromptRequest
from backend.api.app import create_api
from backend.config import Settings
from backend.db.engine import create_engine
from backend.db.migrate import upgrade
from backend.orchestrator.service import PromptDispatcher
from backend.runtime import Runtime
from benchmarks.databases import (
    DEFAULT_POSTGRES_URL,
    libpq,
    load_postgres,
    load_sqlite,
    shown,
)
from benchmarks.dataset import SEED, T0, Data, Generator
from benchmarks.reference import Expected, reference_rule
from benchmarks.timing import median, p95

SQLITE_BOOT_TARGET_MS = 400.0
SMALL_TASKS = 1_000
#: When the loaded summaries were last written (any fixed time after the generated data).
SUMMARY_TIME = T0 + timedelta(days=200)
ACTIONS: tuple[str | None, ...] = (None, "clarification", "permission")
SUMMARY_COLUMNS = (
    "task_status_summaries (task_id, revision, pending_action, primary_session_id, "
    "session_state, updated_at)"
)


# --------------------------------------------------------------------------------------------
# The raw baseline: the task list with pending actions, by hand, in one statement
# --------------------------------------------------------------------------------------------

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

    def __init__(self, execute: Callable[[str, Any], Any], dialect: str, close: Callable[[], None]):
        self._execute = execute
        self._close = close
        self.dialect = dialect
        self.marker = "?" if dialect == "sqlite" else "%s"
        self.sql = raw_task_list_sql(dialect)
        #: Statements the baseline sent (one per task list).
        self.statements = 0

    def task_list(self, workspace_id: str) -> list[tuple[Any, ...]]:
        self.statements += 1
        return list(self._execute(self.sql, (workspace_id, workspace_id)).fetchall())

    def explain(self, workspace_id: str) -> list[str]:
        if self.dialect == "sqlite":
            rows = self._execute("EXPLAIN QUERY PLAN " + self.sql, (workspace_id, workspace_id))
            return [str(r[3]) for r in rows.fetchall()]
        rows = self._execute("EXPLAIN (ANALYZE, BUFFERS) " + self.sql, (workspace_id, workspace_id))
        return [str(r[0]) for r in rows.fetchall()]

    def summaries(self) -> dict[str, str | None]:
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
    con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return RawDriver(lambda sql, params: con.execute(sql, params or ()), "sqlite", con.close)


def postgres_driver(url: str) -> RawDriver:
    con = psycopg.connect(libpq(url), autocommit=True)
    return RawDriver(con.execute, "postgresql", con.close)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Loading: projection.py's data set, plus one correct summary per task
# --------------------------------------------------------------------------------------------


def summary_rows(data: Data, expected: Expected) -> list[tuple[Any, ...]]:
    """``(task_id, revision, pending_action, primary_session_id, session_state)``, correct."""
    primary = {s[1]: (s[0], s[2]) for s in data.sessions if s[3]}
    return [
        (t[0], 1, expected.task.get(t[0]), *primary.get(t[0], (None, None))) for t in data.tasks
    ]


def load_sqlite_with_summaries(path: Path, data: Data, expected: Expected) -> None:
    load_sqlite(path, data)
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("BEGIN")
        written = SUMMARY_TIME.isoformat(" ", "microseconds")  # SQLAlchemy's SQLite format
        con.executemany(
            f"INSERT INTO {SUMMARY_COLUMNS} VALUES (?, ?, ?, ?, ?, ?)",
            [(*row, written) for row in summary_rows(data, expected)],
        )
        con.execute("COMMIT")
        con.execute("ANALYZE")
    finally:
        con.close()


def load_postgres_with_summaries(url: str, data: Data, expected: Expected) -> None:
    load_postgres(url, data)
    with psycopg.connect(libpq(url)) as con:
        written = SUMMARY_TIME.isoformat(" ") + "+00"
        with con.cursor() as cur, cur.copy(f"COPY {SUMMARY_COLUMNS} FROM STDIN") as copy:
            for row in summary_rows(data, expected):
                copy.write_row((*row, written))
        con.commit()
        con.autocommit = True
        con.execute("VACUUM ANALYZE task_status_summaries")


# --------------------------------------------------------------------------------------------
# Measuring through the real app
# --------------------------------------------------------------------------------------------


class RefusingDispatcher(PromptDispatcher):
    """Reads must never dispatch a prompt; if one did, it would fail loudly here rather than
    silently time an agent round trip."""

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:
        raise AssertionError(f"the boot benchmark dispatched a prompt: {prompt}")


class StatementCounter:
    """Counts what SQLAlchemy sends to the driver, by leading keyword.

    That includes SQLite's explicit ``BEGIN`` (``backend.db.engine`` issues it as a statement);
    ``COMMIT`` and ``ROLLBACK`` are driver calls and are not counted on either database.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.kinds: Counter[str] = Counter()
        event.listen(engine.sync_engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        words = statement.split(None, 1)
        self.kinds[words[0].upper() if words else "?"] += 1

    def take(self) -> Counter[str]:
        kinds, self.kinds = self.kinds, Counter()
        return kinds

    def close(self) -> None:
        event.remove(self.engine.sync_engine, "before_cursor_execute", self._record)


@dataclass
class Series:
    """One request kind in one case: its times and per-request statement counts."""

    times: list[float] = field(default_factory=list)
    statements: list[Counter[str]] = field(default_factory=list)
    stale_rows: int = 0

    def add(self, ms: float, kinds: Counter[str]) -> None:
        self.times.append(ms)
        self.statements.append(kinds)

    @property
    def counts(self) -> list[int]:
        return [sum(k.values()) for k in self.statements]

    def shown_statements(self) -> str:
        """The count and its breakdown by keyword, as ranges where requests differed."""

        def span(values: list[int]) -> str:
            low, high = min(values), max(values)
            return str(low) if low == high else f"{low}-{high}"

        kinds = sorted({kind for k in self.statements for kind in k})
        detail = ", ".join(f"{kind} {span([k[kind] for k in self.statements])}" for kind in kinds)
        return f"{span(self.counts)} ({detail})"


@dataclass
class Run:
    database: str
    tasks: int
    sessions: int
    messages: int
    load_s: float = 0.0
    series: dict[str, Series] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def get(self, name: str) -> Series:
        return self.series.setdefault(name, Series())


def expected_list(data: Data, expected: Expected) -> list[tuple[str, str | None]]:
    """The task list the API must return, in its order ``(created_at, id)``."""
    ordered = sorted(data.tasks, key=lambda t: (t[7], t[0]))
    return [(t[0], expected.task.get(t[0])) for t in ordered]


def check_response(label: str, payload: Any, want: list[tuple[str, str | None]]) -> list[str]:
    """Differences between a response's tasks and the reference (empty when right)."""
    tasks = payload.get("tasks") if isinstance(payload, dict) else None
    if not isinstance(tasks, list):
        return [f"{label}: no task list in the response: {str(payload)[:200]}"]
    got = []
    for task in tasks:
        summary = task.get("status_summary")
        got.append((task["id"], summary["pending_action"] if summary else "<no summary>"))
    if [g[0] for g in got] != [w[0] for w in want]:
        return [f"{label}: {len(got)} tasks returned or out of order; {len(want)} expected"]
    wrong = [(g, w) for g, w in zip(got, want, strict=True) if g != w]
    if not wrong:
        return []
    lines = [f"{label}: pending_action differs from the reference on {len(wrong)} tasks"]
    lines += [f"  task {g[0]}: got {g[1]!r}, expected {w[1]!r}" for g, w in wrong[:5]]
    return lines


def check_raw(
    label: str, rows: list[tuple[Any, ...]], want: list[tuple[str, str | None]]
) -> list[str]:
    """Differences between the baseline's rows and the reference (empty when right)."""
    got = [(r[0], r[6]) for r in rows]
    if got == want:
        return []
    if [g[0] for g in got] != [w[0] for w in want]:
        return [f"{label}: {len(got)} tasks returned or out of order; {len(want)} expected"]
    wrong = sum(1 for g, w in zip(got, want, strict=True) if g != w)
    return [f"{label}: pending_action differs from the reference on {wrong} tasks"]


def check_stored(label: str, raw: RawDriver, expected: Expected) -> list[str]:
    """After a repair, the table itself must hold the reference actions (not just the reply)."""
    stored = raw.summaries()
    wrong = [t for t, want in expected.task.items() if stored.get(t, "<missing>") != want]
    if not wrong:
        return []
    return [f"{label}: {len(wrong)} stored summaries still differ from the reference after it"]


def stale_choice(rng: random.Random, expected: Expected, fraction: float) -> dict[str, str | None]:
    """A fresh random ``fraction`` of tasks, each with a wrong pending action."""
    task_ids = sorted(expected.task)
    chosen = rng.sample(task_ids, max(1, round(fraction * len(task_ids))))
    return {t: rng.choice([a for a in ACTIONS if a != expected.task.get(t)]) for t in chosen}


async def measure(
    run: Run,
    url: str,
    load: Callable[[], None],
    open_raw: Callable[[], RawDriver],
    data: Data,
    expected: Expected,
    args: argparse.Namespace,
) -> None:
    """Start the runtime, load the data, then verify and time the requests into ``run``.

    The runtime starts on the migrated, still empty database and the rows are loaded after:
    start-up recovery would refuse the generator's deliberately odd reservation rows (they
    carry no claim metadata), and this benchmark is about reads, not recovery.
    """
    settings = Settings(database_url=url, test_api=False)
    engine = create_engine(url, settings)
    runtime = Runtime(engine, settings, dispatcher=RefusingDispatcher(), owns_engine=True)
    await runtime.start()
    try:
        await engine.dispose()  # no pooled connection holds the database during the bulk load
        start = time.perf_counter()
        load()
        run.load_s = time.perf_counter() - start
        print(f"[{run.database}] {run.tasks} tasks loaded in {run.load_s:.1f} s", flush=True)
        raw = open_raw()
        counter = StatementCounter(engine)
        try:
            transport = httpx.ASGITransport(app=create_api(runtime))
            async with httpx.AsyncClient(
                transport=transport, base_url="http://kandev.bench", timeout=600
            ) as client:
                await _measure(run, client, counter, raw, data, expected, args)
        finally:
            counter.close()
            raw.close()
    finally:
        await runtime.stop()


async def _measure(
    run: Run,
    client: httpx.AsyncClient,
    counter: StatementCounter,
    raw: RawDriver,
    data: Data,
    expected: Expected,
    args: argparse.Namespace,
) -> None:
    ws = data.workspace_id
    requests = {
        "boot": ("/api/v1/boot", {}),
        "tasks": ("/api/v1/tasks", {"workspace_id": ws}),
    }
    want = expected_list(data, expected)

    async def timed(name: str) -> tuple[float, Counter[str], Any]:
        path, params = requests[name]
        counter.take()
        start = time.perf_counter()
        response = await client.get(path, params=params)
        ms = (time.perf_counter() - start) * 1000
        kinds = counter.take()
        if response.status_code != 200:
            run.problems.append(f"{name}: HTTP {response.status_code}: {response.text[:300]}")
        return ms, kinds, response.json()

    def timed_raw() -> tuple[float, list[tuple[Any, ...]]]:
        before = raw.statements
        start = time.perf_counter()
        rows = raw.task_list(ws)
        ms = (time.perf_counter() - start) * 1000
        run.get("raw").statements.append(Counter({"SELECT": raw.statements - before}))
        run.get("raw").times.append(ms)
        return ms, rows

    # Correctness first: the product's answers and the baseline's must match the reference.
    for name in requests:
        _, _, payload = await timed(name)
        run.problems += check_response(f"{run.database} {name} (clean)", payload, want)
    run.problems += check_raw(f"{run.database} raw SQL", raw.task_list(ws), want)
    if run.problems:
        return
    if args.explain:
        print(f"--- {run.database}: plan of the raw statement ---")
        print("\n".join(raw.explain(ws)))

    for _ in range(args.warmup):
        for name in requests:
            await timed(name)
        raw.task_list(ws)
    for _ in range(args.repeat):  # interleaved, so drift hits every series alike
        for name in requests:
            ms, kinds, payload = await timed(name)
            run.get(f"clean {name}").add(ms, kinds)
            run.problems += check_response(f"{run.database} {name} (clean)", payload, want)
        timed_raw()
        if run.problems:
            return

    rng = random.Random(args.seed + run.tasks)
    for _ in range(args.stale_repeat):
        for name in requests:
            wrong = stale_choice(rng, expected, args.stale_fraction)
            raw.make_stale(wrong)
            ms, kinds, payload = await timed(name)
            series = run.get(f"stale {name}")
            series.add(ms, kinds)
            series.stale_rows = len(wrong)
            label = f"{run.database} {name} ({len(wrong)} stale)"
            run.problems += check_response(label, payload, want)
            run.problems += check_stored(label, raw, expected)
            if run.problems:
                return


def bench_sqlite(data: Data, expected: Expected, args: argparse.Namespace) -> Run:
    run = Run("sqlite", len(data.tasks), len(data.sessions), len(data.messages))
    workdir = Path(tempfile.mkdtemp(prefix="kandev_boot_"))
    path = workdir / "boot.db"
    url = f"sqlite+aiosqlite:///{path}"
    print(f"[sqlite] migrating and loading {path} ...", flush=True)
    try:
        upgrade(url)
        asyncio.run(
            measure(
                run,
                url,
                lambda: load_sqlite_with_summaries(path, data, expected),
                lambda: sqlite_driver(path),
                data,
                expected,
                args,
            )
        )
    finally:
        if args.keep:
            print(f"[sqlite] kept {path}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return run


def bench_postgres(data: Data, expected: Expected, args: argparse.Namespace) -> Run | None:
    server = os.environ.get("KANDEV_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        admin = psycopg.connect(libpq(server), autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(
            f"[postgres] PostgreSQL at {shown(server)} is unreachable ({reason}); "
            "skipping PostgreSQL (set KANDEV_BENCH_POSTGRES_URL to point elsewhere)."
        )
        return None
    run = Run("postgres", len(data.tasks), len(data.sessions), len(data.messages))
    name = f"kandev_boot_{uuid.uuid4().hex[:10]}"
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        print(f"[postgres] migrating and loading database {name} on {shown(server)} ...")
        upgrade(url)
        asyncio.run(
            measure(
                run,
                url,
                lambda: load_postgres_with_summaries(url, data, expected),
                lambda: postgres_driver(url),
                data,
                expected,
                args,
            )
        )
    finally:
        if args.keep:
            print(f"[postgres] kept database {name}: {shown(url)}")
        else:
            with psycopg.connect(libpq(server), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return run


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

ROWS = (
    ("clean boot", "boot, clean"),
    ("clean tasks", "tasks, clean"),
    ("stale boot", "boot, 10% stale"),
    ("stale tasks", "tasks, 10% stale"),
    ("raw", "raw SQL"),
)


def report(runs: list[Run], args: argparse.Namespace) -> bool:
    """Print the tables and the checks; return whether the run passes (correct + constant)."""
    stale_label = f"{args.stale_fraction:.0%} stale"
    header = (
        f"{'database':<9} {'tasks':>6} {'request':<18} {'median':>8} {'p95':>8} {'min':>8} "
        f"{'n':>3}  statements per request"
    )
    print("\n" + header)
    print("-" * (len(header) + 24))
    for run in runs:
        if run.problems:
            print(f"{run.database:<9} {run.tasks:>6}   ABORTED (wrong results, see below)")
            continue
        for key, label in ROWS:
            s = run.series.get(key)
            if s is None or not s.times:
                continue
            label = label.replace("10% stale", stale_label)
            extra = f"  [{s.stale_rows} stale rows]" if s.stale_rows else ""
            print(
                f"{run.database:<9} {run.tasks:>6} {label:<18} {median(s.times):>8.1f} "
                f"{p95(s.times):>8.1f} {min(s.times):>8.1f} {len(s.times):>3}  "
                f"{s.shown_statements()}{extra}"
            )
    print(
        "(ms per request through the ASGI app, response body included; raw SQL = the "
        "hand-written statement on the bare driver, rows fetched; statements = what SQLAlchemy "
        "sent, incl. SQLite's BEGIN, excl. COMMIT)"
    )

    ok = all(not run.problems for run in runs)
    good = [run for run in runs if not run.problems]
    print("\nStatements per request, clean case, by number of tasks:")
    for database in sorted({run.database for run in good}):
        by_size = sorted((r for r in good if r.database == database), key=lambda r: r.tasks)
        if len(by_size) < 2:
            print(f"  {database}: only one size ran; nothing to compare")
            continue
        for request in ("boot", "tasks"):
            counts = {r.tasks: sorted(set(r.series[f"clean {request}"].counts)) for r in by_size}
            same = len({tuple(c) for c in counts.values()}) == 1 and all(
                len(c) == 1 for c in counts.values()
            )
            ok = ok and same
            shown_counts = ", ".join(
                f"{n} tasks: {'/'.join(map(str, c))}" for n, c in counts.items()
            )
            verdict = "SAME (independent of the number of tasks)" if same else "DIFFERENT: FAIL"
            print(f"  {database:<9} {request:<6} {shown_counts}  -> {verdict}")

    print(f"\nStatements per request with {stale_label} summaries (repair):")
    for run in good:
        for request in ("boot", "tasks"):
            clean, stale = run.series.get(f"clean {request}"), run.series.get(f"stale {request}")
            if not clean or not stale or not stale.times:
                continue
            base, repaired = median(clean.counts), median(stale.counts)
            extra = repaired - base
            print(
                f"  {run.database:<9} {run.tasks:>6} tasks {request:<6} {stale.stale_rows:>5} "
                f"stale rows: {repaired:.0f} statements = clean {base:.0f} + {extra:.0f} "
                f"({extra / stale.stale_rows:.3f} per stale row); {median(stale.times):.1f} ms "
                f"vs {median(clean.times):.1f} ms clean"
            )

    print("\nTarget (reported, never fails the run):")
    for run in good:
        if run.database != "sqlite" or run.tasks != args.tasks:
            continue
        for key, label in (("clean boot", "clean"), ("stale boot", stale_label)):
            s = run.series.get(key)
            if s is None or not s.times:
                continue
            verdict = "PASS" if median(s.times) < SQLITE_BOOT_TARGET_MS else "MISS"
            print(
                f"  sqlite boot median < {SQLITE_BOOT_TARGET_MS:.0f} ms at {run.tasks} tasks, "
                f"{label}: {verdict} ({median(s.times):.1f} ms, p95 {p95(s.times):.1f} ms)"
            )
    for run in runs:
        if run.problems:
            print(f"\nWRONG RESULTS on {run.database} at {run.tasks} tasks:")
            for line in run.problems[:30]:
                print("  " + line)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database", "--db", choices=("sqlite", "postgres", "both"), default="both"
    )
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument(
        "--small-tasks",
        type=int,
        default=SMALL_TASKS,
        help="the second size, for the statement-count comparison",
    )
    parser.add_argument("--sessions-per-task", type=int, default=3)
    parser.add_argument(
        "--messages-per-task", type=int, default=100, help="100 = projection.py's 1,000,000"
    )
    parser.add_argument("--repeat", type=int, default=20, help="clean requests of each kind")
    parser.add_argument(
        "--stale-repeat", type=int, default=5, help="repairing requests of each kind"
    )
    parser.add_argument("--stale-fraction", type=float, default=0.10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--explain", action="store_true", help="print the raw statement's plan")
    parser.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    args = parser.parse_args(argv)
    if min(args.tasks, args.small_tasks, args.sessions_per_task, args.repeat) < 1:
        parser.error("--tasks, --small-tasks, --sessions-per-task and --repeat must be positive")
    if args.stale_repeat < 1 or not 0 < args.stale_fraction <= 1 or args.messages_per_task < 0:
        parser.error("--stale-repeat must be positive and --stale-fraction in (0, 1]")

    runs: list[Run] = []
    for size in sorted({args.small_tasks, args.tasks}):
        start = time.perf_counter()
        data = Generator(args.seed).build(
            size, args.sessions_per_task, size * args.messages_per_task
        )
        expected = reference_rule(data)
        mismatch = sum(1 for s, (_, a) in expected.session.items() if a != data.intended[s])
        actions = Counter(expected.task.values())
        print(
            f"generated {len(data.tasks)} tasks, {len(data.sessions)} sessions, "
            f"{len(data.turns)} turns, {len(data.messages)} messages in "
            f"{time.perf_counter() - start:.1f} s; reference: {actions['clarification']} tasks "
            f"clarification, {actions['permission']} permission, {actions[None]} none",
            flush=True,
        )
        if mismatch:
            print(f"ABORT: the reference rule disagrees with the generator on {mismatch} sessions")
            return 1
        gc.collect()
        gc.freeze()  # keep the generated rows out of the collector's way while timing
        if args.database in ("sqlite", "both"):
            runs.append(bench_sqlite(data, expected, args))
        if args.database in ("postgres", "both"):
            pg = bench_postgres(data, expected, args)
            if pg is not None:
                runs.append(pg)
            elif args.database == "postgres":
                return 1
        del data, expected
        gc.unfreeze()
        gc.collect()
    return 0 if report(runs, args) else 1


if __name__ == "__main__":
    sys.exit(main())
