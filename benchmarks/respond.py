"""Benchmark of ``POST /api/v1/clarification/{pending_id}/respond``: latency and throughput.

Two paths are measured, each with 1, 20 and 100 concurrent clients: **live** (the agent is
still waiting on the question: bundle ``active_live``, outcome ``delivered``) and **detached**
(the agent stopped waiting: ``active_detached``, outcome ``resumed``, a new prompt dispatched
to the agent). The backend runs as real processes (``backend.serve`` through the counting
launcher ``benchmarks.respond_server``) with the ACP mock agent, on a scratch SQLite file and/or
a scratch PostgreSQL database; ``benchmarks.respond_load`` drives them in rounds (arm questions
untimed, fire the answers timed, settle). Beside each row stand the same essential transactions
on the bare driver (``benchmarks.respond_raw``), and per answer the CPU, statements,
transactions and events (``benchmarks.respond_report``). ``--profile`` adds a profiled live run
with 20 clients per database and reports where the server's event loop spends its time.

The goal it tracks: >= 150 answers/s on one process with 20 clients, p99 < 250 ms. Timings on
a shared machine are noisy: the run never fails on them. Run from the repository root:
``python -m benchmarks.respond --help``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from backend.db.migrate import upgrade
from benchmarks import respond_raw as raw
from benchmarks.databases import postgres_server, scratch_postgres, scratch_sqlite
from benchmarks.respond_load import Bench, BenchServer, Measured, percentile
from benchmarks.respond_report import breakdown, markdown, profile_summary, results_table
from benchmarks.timing import median

RESULTS = Path(__file__).resolve().parent / "results"
PROFILE_CLIENTS = 20
MAX_SESSIONS = 100


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--clients", default=None, help="comma list (default 1,20,100)")
    parser.add_argument("--mode", default="live,detached", help="comma list: live, detached")
    parser.add_argument("--answers", type=int, default=None, help="timed answers per row (200)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed answers per row (10)")
    parser.add_argument("--workers", default="1", help="comma list of server processes")
    parser.add_argument(
        "--sessions", type=int, default=None, help="agent sessions (default: max clients, <= 100)"
    )
    parser.add_argument("--profile", action="store_true", help="profiled live 20-client run")
    parser.add_argument("--quick", action="store_true", help="smoke test: few answers")
    parser.add_argument("--no-raw", action="store_true", help="skip the bare-driver runs")
    args = parser.parse_args(argv)
    args.clients = _ints(args.clients or ("1,4" if args.quick else "1,20,100"), parser)
    args.workers = _ints(args.workers, parser)
    args.mode = [m.strip() for m in args.mode.split(",") if m.strip()]
    if not args.mode or set(args.mode) - {"live", "detached"}:
        parser.error("--mode takes live and/or detached")
    args.answers = args.answers or (12 if args.quick else 200)
    args.warmup = args.warmup if args.warmup is not None else (4 if args.quick else 10)
    args.sessions = args.sessions or min(MAX_SESSIONS, max(args.clients))
    if min(args.answers, args.sessions) < 1 or args.warmup < 0:
        parser.error("--answers and --sessions must be positive")
    return args


def _ints(text: str, parser: argparse.ArgumentParser) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"not a comma list of numbers: {text!r}")
    if not values or min(values) < 1:
        parser.error(f"numbers must be positive: {text!r}")
    return values


async def run_servers(
    db: str, url: str, workers: int, args: argparse.Namespace, log_dir: Path
) -> tuple[list[Measured], list[str]]:
    """Start the workers, create the session pool, measure every mode x clients row, and the
    profiled run; the servers and their agents are stopped whatever happens."""
    nats = os.environ.get("KANDEV_BENCH_NATS_URL", "nats://127.0.0.1:4222")
    bench = Bench(db, url, workers, log_dir, nats)
    results: list[Measured] = []
    profile: list[str] = []
    try:
        began = time.perf_counter()
        await bench.start()
        await bench.create_sessions(args.sessions)
        print(
            f"[{db} x{workers}] {workers} server(s), {args.sessions} sessions ready in "
            f"{time.perf_counter() - began:.1f} s",
            flush=True,
        )
        for mode in args.mode:
            errors = await bench.prime(mode)
            if errors:
                print(f"  priming {mode}: {len(errors)} errors (first: {errors[0][:200]})")
        for mode in args.mode:
            for clients in args.clients:
                if clients > args.sessions:
                    print(f"  note: {clients} clients share {args.sessions} questions per round")
                result = await bench.measure(mode, clients, args.answers, args.warmup)
                results.append(result)
                _print_row(result)
        if args.profile and workers == 1:
            profile = await _profiled(bench, args, log_dir)
    finally:
        await bench.close()
    return results, profile


async def _profiled(bench: Bench, args: argparse.Namespace, log_dir: Path) -> list[str]:
    """Two profiled live runs: the greenlet-aware sampler (where the loop's CPU goes, with
    inclusive times), then pyinstrument when installed, else cProfile (exact self times and
    call counts; its cumulative column is wrong across SQLAlchemy's greenlet switches)."""
    clients = min(args.clients, key=lambda c: abs(c - PROFILE_CLIENTS))
    second = "pyinstrument" if importlib.util.find_spec("pyinstrument") else "cprofile"
    if second == "cprofile":
        print("  pyinstrument is not installed: cProfile instead (plus the stack sampler)")
    sections: list[str] = []
    for kind in ("sampler", second):
        print(f"  profiling the live run with {clients} clients ({kind}) ...", flush=True)
        result = await bench.measure("live", clients, args.answers, args.warmup, profile=kind)
        out = log_dir / f"profile-{bench.db}-{kind}.txt"
        body = {"out": str(out), "top": 25}
        done = (await bench.http[0].post("/_bench/profile/report", json=body)).json()
        lat = result.latencies
        loop_cpu = result.cpu_total["server loop"] / len(lat) * 1000
        head = (
            f"== {bench.db}: live, {clients} clients, {kind}: {len(lat)} answers, p50 "
            f"{median(lat) * 1000:.1f} ms, p99 {percentile(lat, 0.99) * 1000:.1f} ms, "
            f"{len(lat) / result.fire_s:.1f} answers/s, loop CPU {loop_cpu:.1f} ms/answer "
            "(all with the profiler on) =="
        )
        summary = profile_summary(done["raw"], len(lat), kind) if done["raw"] else done["top"]
        print(f"\n{head}\n{summary}\n", flush=True)
        full = out.read_text() if out.exists() else ""
        sections += [head, summary, "", f"-- full {kind} report --", full, ""]
    return sections


def _print_row(r: Measured) -> None:
    lat = r.latencies
    cpu = (r.cpu_total.get("server loop", 0) + r.cpu_total.get("server threads", 0)) / len(lat)
    print(
        f"  {r.mode:<8} {r.clients:>3} clients: {len(lat)} answers, p50 "
        f"{median(lat) * 1000:.1f} ms, p99 {percentile(lat, 0.99) * 1000:.1f} ms, max "
        f"{max(lat) * 1000:.1f} ms, {len(lat) / r.fire_s:.1f} answers/s; server CPU "
        f"{cpu * 1000:.1f} ms/answer; errors {len(r.errors)}"
        + (f" (first: {r.errors[0][:200]})" if r.errors else ""),
        flush=True,
    )


def bare_driver(db: str, connect: Any, results: list[Measured], args: argparse.Namespace) -> None:
    """The essential transactions with the same concurrency, after the servers stopped."""
    dialect = raw.SQLITE if db == "sqlite" else raw.POSTGRES
    done: dict[tuple[str, int], raw.RawResult] = {}
    for r in results:
        key = (r.mode, r.clients)
        if key not in done:
            warm = raw.seed(connect, dialect, max(args.warmup, r.clients))
            raw.run(connect, dialect, warm, r.mode, r.clients)
            questions = raw.seed(connect, dialect, len(r.latencies))
            done[key] = raw.run(connect, dialect, questions, r.mode, r.clients)
            lat = done[key].latencies
            print(
                f"  bare {db} {r.mode:<8} {r.clients:>3} clients: p50 {median(lat) * 1000:.2f} "
                f"ms, p99 {percentile(lat, 0.99) * 1000:.2f} ms, "
                f"{len(lat) / done[key].wall_s:.0f} answers/s",
                flush=True,
            )
        r.raw = done[key]


def run_database(db: str, args: argparse.Namespace) -> tuple[list[Measured], list[str]]:
    """Every worker count on a fresh scratch database of kind ``db`` (dropped afterwards)."""
    results: list[Measured] = []
    profile: list[str] = []
    for workers in args.workers:
        if workers > 1 and db == "sqlite":
            print(f"[sqlite] SQLite is single-process: --workers {workers} skipped")
            continue
        log_dir = Path(tempfile.mkdtemp(prefix="kandev_respond_logs_"))
        if db == "sqlite":
            with scratch_sqlite("kandev_respond_", "respond.db", keep=False) as path:
                upgrade(f"sqlite:///{path}")
                url = f"sqlite+aiosqlite:///{path}"
                done, prof = asyncio.run(_cancellable(run_servers(db, url, workers, args, log_dir)))
                if not args.no_raw:
                    bare_driver(db, raw.sqlite_connector(path), done, args)
        else:
            server = postgres_server()
            if server is None:
                return results, profile
            with scratch_postgres(server, "kandev_respond_", keep=False) as (_name, url):
                upgrade(url)
                done, prof = asyncio.run(_cancellable(run_servers(db, url, workers, args, log_dir)))
                if not args.no_raw:
                    bare_driver(db, raw.postgres_connector(url), done, args)
        if any(r.errors for r in done):
            print(f"[{db} x{workers}] errors: server logs kept in {log_dir}")
        else:
            shutil.rmtree(log_dir, ignore_errors=True)
        results += done
        profile += prof
    return results, profile


async def _cancellable(work: Any) -> Any:
    """SIGTERM cancels the run like Ctrl-C does, so the cleanup code runs."""
    task = asyncio.ensure_future(work)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await task


def kill_leftovers() -> None:
    """Last resort after an interrupted run: SIGKILL every server group still alive (each
    group holds a server and its agent processes)."""
    for pid in BenchServer.started:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]  # all, idle + iowait


def machine_quiet() -> str:
    """What else ran when the benchmark started: the CPU busy over one second and any agent
    process left behind by an earlier run (nine stray mock agents once made a whole table
    ~30% slower; a table measured beside them says so)."""
    total, idle = _cpu_times()
    time.sleep(1.0)
    total2, idle2 = _cpu_times()
    busy = 1 - (idle2 - idle) / max(total2 - total, 1)
    strays = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if b"mock_acp" in (entry / "cmdline").read_bytes():
                    strays += 1
    quiet = busy < 0.1 and not strays
    return f"Machine at start: {os.cpu_count()} cores, {busy:.0%} busy, {strays} stray agents" + (
        " (quiet)" if quiet else " (not quiet: figures are low)"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    machine = machine_quiet()
    print(machine)
    results: list[Measured] = []
    profile: list[str] = []
    dbs = ("sqlite", "postgres") if args.db == "both" else (args.db,)
    try:
        for db in dbs:
            done, prof = run_database(db, args)
            results += done
            profile += prof
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted: servers, agents and scratch databases cleaned up")
        return 130
    finally:
        kill_leftovers()
    if not results:
        return 1
    notes = [
        f"Command: `python -m benchmarks.respond {' '.join(argv or sys.argv[1:])}`".rstrip(),
        f"{args.sessions} agent sessions; {args.warmup} warm-up answers, then "
        f"{args.answers} timed answers per row; latency = client-side respond call; "
        "answers/s = answers / wall time of the fire windows; bare = the same essential "
        "transactions on sqlite3/psycopg with the same number of threads.",
        machine + ".",
    ]
    extra = ["## Statements per answer", ""]
    for db in dbs:
        for mode in args.mode:
            rows = [r for r in results if r.db == db and r.mode == mode and r.workers == 1]
            if rows:
                extra += [breakdown(min(rows, key=lambda r: r.clients)), ""]
    text = markdown(results, notes, extra)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "respond.md").write_text(text)
    if profile:
        (RESULTS / "respond-profile.txt").write_text("\n".join(profile) + "\n")
    print("\n" + results_table(results))
    print(f"\nwritten: {RESULTS / 'respond.md'}" + (" and respond-profile.txt" if profile else ""))
    return 0 if all(not r.errors for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
