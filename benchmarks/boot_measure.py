"""The boot benchmark's measurement: real requests through the ASGI app, each one checked.

Every response is compared with the reference rule before its time counts, and after each
repair the stored summaries are read back past the app: a fast wrong answer must never pass
as a result. The SQL statements each request sends are counted too, because the claim to
check is that a clean request's statement count does not grow with the number of tasks.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.api.app import create_api
from backend.config import Settings
from backend.db.engine import create_engine
from backend.orchestrator.dispatch import PromptRequest
from backend.orchestrator.service import PromptDispatcher
from backend.runtime import Runtime
from benchmarks.boot_raw import RawDriver
from benchmarks.dataset import Data
from benchmarks.reference import Expected

ACTIONS: tuple[str | None, ...] = (None, "clarification", "permission")


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
    """One database at one size: every series measured there, or why it stopped."""

    database: str
    tasks: int
    sessions: int
    messages: int
    load_s: float = 0.0
    series: dict[str, Series] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def get(self, name: str) -> Series:
        """The series ``name``, created on first use."""
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
    """Verify both requests and the baseline, then time them clean, then while repairing."""
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
