"""Benchmark of ``GET /api/v1/boot`` and ``GET /api/v1/tasks`` at production size.

Both requests return every task with its status summary, and every summary is repaired first
(``backend.projections.summaries``): the pending action is recomputed by the rule in one
statement and each stale summary is rewritten with a compare-and-set. This script measures what
a client waits for, through the real ASGI app in-process (``create_api(runtime)`` behind
``httpx.ASGITransport``, after ``runtime.start()``), on SQLite and/or a scratch PostgreSQL
database, on the data set ``benchmarks.projection`` uses (the generator of
``benchmarks.dataset``, the Python reference of the rule in ``benchmarks.reference``) plus a
correct ``task_status_summaries`` row per task:

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

Run ``python -m benchmarks.boot --help`` from the repository root; see
``benchmarks/README.md``. The requests and their checks live in ``benchmarks.boot_measure``,
the bare-driver side (baseline statement, summary rows) in ``benchmarks.boot_raw``; this
module runs the databases and prints the report.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections import Counter

from backend.db.migrate import upgrade
from benchmarks.boot_measure import Run, measure
from benchmarks.boot_raw import (
    load_postgres_with_summaries,
    load_sqlite_with_summaries,
    postgres_driver,
    sqlite_driver,
)
from benchmarks.databases import (
    postgres_server,
    run_databases,
    scratch_postgres,
    scratch_sqlite,
    shown,
)
from benchmarks.dataset import SEED, Data, Generator
from benchmarks.reference import Expected, generator_disagreements, reference_rule
from benchmarks.timing import median, p95

SQLITE_BOOT_TARGET_MS = 400.0
SMALL_TASKS = 1_000


def bench_sqlite(data: Data, expected: Expected, args: argparse.Namespace) -> Run:
    """Migrate a temporary SQLite file, start the app on it, load, verify and time."""
    run = Run("sqlite", len(data.tasks), len(data.sessions), len(data.messages))
    with scratch_sqlite("kandev_boot_", "boot.db", args.keep) as path:
        url = f"sqlite+aiosqlite:///{path}"
        print(f"[sqlite] migrating and loading {path} ...", flush=True)
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
    return run


def bench_postgres(data: Data, expected: Expected, args: argparse.Namespace) -> Run | None:
    """The same on a scratch PostgreSQL database (None: no server)."""
    server = postgres_server()
    if server is None:
        return None
    run = Run("postgres", len(data.tasks), len(data.sessions), len(data.messages))
    with scratch_postgres(server, "kandev_boot_", args.keep) as (name, url):
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
    """Each size in turn: generate, check the generator, run each database; then report."""
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
        mismatch = len(generator_disagreements(data, expected))
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
        done = run_databases(args.database, bench_sqlite, bench_postgres, data, expected, args)
        if done is None:
            return 1
        runs += done
        del data, expected
        gc.unfreeze()
        gc.collect()
    return 0 if report(runs, args) else 1


if __name__ == "__main__":
    sys.exit(main())
