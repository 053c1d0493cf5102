"""Benchmark of the task-list pending-action projection at production size.

Builds a realistic, deterministic data set (by default 10,000 tasks, 30,000 sessions and
1,000,000 messages) in a temporary SQLite file and/or a scratch PostgreSQL database, checks
that :func:`backend.authority.session_authority` returns exactly what the spec rule says
(recomputed here in plain Python from the generated rows), then times

* ``repository``: ``read_tx`` + ``session_authority`` + ``task_pending_actions`` on the
  product's async engine, and
* ``raw``: the very same SQL statement (captured from ``session_authority`` and compiled with
  literal binds for the dialect) executed through the sync driver, fetching all rows.

Run ``python -m benchmarks.projection --help`` from the repository root; see
``benchmarks/README.md``. The data set and the reference rule live in ``benchmarks.dataset``
and ``benchmarks.reference`` (shared with ``benchmarks.boot``), the measurement in
``benchmarks.projection_measure``; this module runs the databases and prints the report.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import psycopg

from benchmarks.databases import (
    libpq,
    load_postgres,
    load_sqlite,
    postgres_server,
    run_databases,
    scratch_postgres,
    scratch_sqlite,
    shown,
)
from benchmarks.dataset import CLARIFICATION, PERMISSION, SEED, Data, Generator
from benchmarks.projection_measure import RawDriver, Timings, measure
from benchmarks.reference import Expected, generator_disagreements, reference_rule
from benchmarks.timing import median, p95

SQLITE_TARGET_MS = 250.0
RATIO_TARGET = 1.3


@dataclass
class Result:
    """One database's outcome: its timings, or why they were not taken."""

    database: str
    tasks: int
    sessions: int
    messages: int
    load_s: float
    timings: Timings
    verified: bool
    problems: list[str]
    counts: Counter[str]


def bench_sqlite(data: Data, expected: Expected, args: argparse.Namespace) -> Result:
    """Load a temporary SQLite file, then verify and time it."""
    with scratch_sqlite("kandev_bench_", "bench.db", args.keep) as path:
        print(f"[sqlite] loading into {path} ...", flush=True)
        start = time.perf_counter()
        load_sqlite(path, data)
        load_s = time.perf_counter() - start
        size_mb = path.stat().st_size / 1e6
        print(f"[sqlite] loaded in {load_s:.1f} s (file {size_mb:.0f} MB, schema + ANALYZE)")
        raw = sqlite3.connect(path, isolation_level=None, check_same_thread=False)

        def plan(sql: str, params: Any) -> list[str]:
            depth: dict[int, int] = {0: -1}
            lines = []
            for node, parent, _unused, detail in raw.execute(
                "EXPLAIN QUERY PLAN " + sql, params or ()
            ):
                depth[node] = depth.get(parent, -1) + 1
                lines.append("  " * depth[node] + detail)
            return lines

        driver = RawDriver(
            fetch=lambda sql: raw.execute(sql).fetchall(),
            explain=lambda sql: plan(sql, None),
            plan=plan,
        )
        try:
            timings, problems, counts = asyncio.run(
                measure("sqlite", f"sqlite+aiosqlite:///{path}", driver, data, expected, args)
            )
        finally:
            raw.close()
    return result("sqlite", data, load_s, timings, problems, counts)


def bench_postgres(data: Data, expected: Expected, args: argparse.Namespace) -> Result | None:
    """Load a scratch PostgreSQL database, then verify and time it (None: no server)."""
    server = postgres_server()
    if server is None:
        return None
    with scratch_postgres(server, "kandev_bench_", args.keep) as (name, url):
        print(f"[postgres] loading into database {name} on {shown(server)} ...", flush=True)
        start = time.perf_counter()
        load_postgres(url, data)
        load_s = time.perf_counter() - start
        print(f"[postgres] loaded in {load_s:.1f} s (schema + COPY + VACUUM ANALYZE)")
        raw = psycopg.connect(libpq(url), autocommit=True)

        def run(sql: str, params: Any = None) -> list[tuple[Any, ...]]:
            return raw.execute(sql, params).fetchall()  # type: ignore[arg-type]

        driver = RawDriver(
            fetch=run,
            explain=lambda sql: [r[0] for r in run("EXPLAIN (ANALYZE, BUFFERS) " + sql)],
            plan=lambda sql, params: [r[0] for r in run("EXPLAIN (COSTS OFF) " + sql, params)],
        )
        try:
            timings, problems, counts = asyncio.run(
                measure("postgres", url, driver, data, expected, args)
            )
        finally:
            raw.close()
    return result("postgres", data, load_s, timings, problems, counts)


def result(
    name: str,
    data: Data,
    load_s: float,
    timings: Timings,
    problems: list[str],
    counts: Counter[str],
) -> Result:
    """The ``Result`` of a measured database (verified when no problem was found)."""
    return Result(
        database=name,
        tasks=len(data.tasks),
        sessions=len(data.sessions),
        messages=len(data.messages),
        load_s=load_s,
        timings=timings,
        verified=not problems,
        problems=problems,
        counts=counts,
    )


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def report(results: list[Result]) -> bool:
    """Print the table and the targets; return whether every run was verified correct."""
    header = (
        f"{'database':<9} {'tasks':>7} {'sessions':>8} {'messages':>9} "
        f"{'repo med':>9} {'repo p95':>9} {'raw med':>8} {'raw p95':>8} {'ratio':>6}"
    )
    print("\n" + header)
    print("-" * len(header))
    ok = True
    for r in results:
        if not r.verified:
            ok = False
            print(f"{r.database:<9} {r.tasks:>7} {r.sessions:>8} {r.messages:>9}   ABORTED")
            continue
        repo, raw = r.timings.repository, r.timings.raw
        print(
            f"{r.database:<9} {r.tasks:>7} {r.sessions:>8} {r.messages:>9} "
            f"{median(repo):>9.1f} {p95(repo):>9.1f} {median(raw):>8.1f} {p95(raw):>8.1f} "
            f"{median(repo) / median(raw):>6.2f}"
        )
    print("(times in ms; ratio = repository median / raw median)")
    for r in results:
        if r.verified:
            paired = [a / b for a, b in zip(r.timings.repository, r.timings.raw, strict=True)]
            print(
                f"  {r.database}: min repository {min(r.timings.repository):.1f} ms, "
                f"min raw {min(r.timings.raw):.1f} ms, median of paired ratios "
                f"{median(paired):.2f} ({len(paired)} interleaved runs)"
            )
    print()
    for r in results:
        if not r.verified:
            continue
        repo_med, raw_med = median(r.timings.repository), median(r.timings.raw)
        if r.database == "sqlite":
            verdict = "PASS" if repo_med < SQLITE_TARGET_MS else "FAIL"
            print(
                f"target sqlite repository median < {SQLITE_TARGET_MS:.0f} ms: "
                f"{verdict} ({repo_med:.1f} ms)"
            )
        ratio = repo_med / raw_med
        verdict = "PASS" if ratio <= RATIO_TARGET else "FAIL"
        print(f"target {r.database} ratio <= {RATIO_TARGET}: {verdict} ({ratio:.2f})")
    for r in results:
        if not r.verified:
            print(f"\nABORTED {r.database}: results are WRONG, timings not taken:")
            for line in r.problems:
                print("  " + line)
    return ok


def main(argv: list[str] | None = None) -> int:
    """Generate, check the generator against the reference, then run each database."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--sessions-per-task", type=int, default=3)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--explain", action="store_true", help="print the query plans")
    parser.add_argument("--keep", action="store_true", help="keep the databases afterwards")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.sessions_per_task < 1 or args.repeat < 1 or args.messages < 0:
        parser.error("--tasks, --sessions-per-task and --repeat must be positive")

    start = time.perf_counter()
    data = Generator(args.seed).build(args.tasks, args.sessions_per_task, args.messages)
    expected = reference_rule(data)
    request_rows = sum(1 for m in data.messages if m[4] in (CLARIFICATION, PERMISSION))
    print(
        f"generated {len(data.tasks)} tasks, {len(data.sessions)} sessions, "
        f"{len(data.turns)} turns, {len(data.messages)} messages "
        f"({request_rows} request rows) in {time.perf_counter() - start:.1f} s (seed {args.seed})"
    )
    for kind, n in sorted(data.scenario_counts.items()):
        print(f"  {kind:<45} {n:>7}")
    rule_actions = Counter(a for _, a in expected.session.values())
    intended = Counter(data.intended.values())
    print(
        f"reference rule: {rule_actions['clarification']} sessions pending clarification "
        f"({rule_actions['clarification'] / len(data.sessions):.1%}), "
        f"{rule_actions['permission']} pending permission; "
        f"tasks: {sum(1 for a in expected.task.values() if a == 'clarification')} clarification, "
        f"{sum(1 for a in expected.task.values() if a == 'permission')} permission"
    )
    mismatch = generator_disagreements(data, expected)
    if mismatch:
        print(
            f"ABORT: the generator meant {intended['clarification']} clarification / "
            f"{intended['permission']} permission sessions but the reference rule finds "
            f"{len(mismatch)} sessions that differ (first: {mismatch[:3]}); generator bug."
        )
        return 1

    # The generated rows stay alive for the checks; keep them out of the garbage collector's
    # way so collections triggered by the measured code do not walk a million tuples.
    gc.collect()
    gc.freeze()

    results = run_databases(args.db, bench_sqlite, bench_postgres, data, expected, args)
    if results is None:
        return 1
    for r in results:
        if r.verified:
            print(
                f"[{r.database}] verified: {r.counts['clarification']} sessions clarification, "
                f"{r.counts['permission']} permission, {r.counts[None]} none; "
                f"{r.counts['task:clarification']} tasks clarification, "
                f"{r.counts['task:permission']} permission - matches the reference rule"
            )
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
