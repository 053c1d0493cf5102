"""The backend as ``benchmarks.respond`` runs it: ``backend.serve`` plus counters and a profiler.

Why a launcher instead of ``python -m backend.serve``: the benchmark has to say what one answer
costs inside the server (statements, transactions, events, log records, CPU by function) and
only over the measured windows, not over start-up or the untimed arming of questions. That
needs hooks inside the server process, and the backend is not changed for a benchmark. So this
module patches nothing but observers onto it, then runs ``backend.serve.main`` unchanged:

* SQLAlchemy listeners on every ``Engine`` (statements by text, commits, rollbacks) and
  ``Pool`` (checkouts), each tagged with the HTTP route being served (a context variable set by
  an outermost ASGI middleware), or ``<route> (spawned)`` for tasks a request started, or
  ``background`` for the start-up tasks (e.g. the summary projector);
* the event buses' ``publish`` (events by type), ``Logger.callHandlers`` (records by logger)
  and ``gc.callbacks`` (cyclic collections and their time, by generation);
* ``GET /_bench/stats`` returns the counters (``/_bench/statements`` just their total);
  ``POST /_bench/profile/start`` (``{"kind": "sampler" | "cprofile" | "pyinstrument"}``) and
  ``/stop`` resume and pause one profiler of the event loop's thread; ``/report`` with
  ``{"out": path}`` writes its whole report there and returns its top lines and its table.
"""

from __future__ import annotations

import asyncio
import contextvars
import cProfile
import gc
import io
import logging
import pstats
import re
import signal
import sys
import time
from collections import Counter
from typing import Any

import greenlet
from fastapi import FastAPI
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool
from starlette.types import ASGIApp, Receive, Scope, Send

import backend.serve as serve
from backend.events.bus import InMemoryEventBus
from backend.events.nats_bus import NatsEventBus
from backend.runtime import UPKEEP_TASK

#: The request being served (route, its task); tasks it spawns inherit it.
REQUEST: contextvars.ContextVar[tuple[str, Any]] = contextvars.ContextVar(
    "bench_request", default=("background", None)
)
#: Where a worker's heartbeat and sweep count (``backend.runtime.UPKEEP_TASK``).
UPKEEP = "worker upkeep"
_IDS = re.compile(r"/[0-9A-HJKMNP-TV-Z]{26}(?=/|$)")  # ULIDs in paths become {id}
TOP_FUNCTIONS = 25


class Counters:
    """Everything counted since the process started; the client takes differences."""

    def __init__(self) -> None:
        self.statements: Counter[tuple[str, str]] = Counter()
        self.commits: Counter[str] = Counter()
        self.rollbacks: Counter[str] = Counter()
        self.checkouts: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.events: Counter[tuple[str, str]] = Counter()
        self.logs: Counter[tuple[str, str]] = Counter()
        #: Cyclic garbage collections by generation: how many, and their seconds.
        self.gc_runs: Counter[str] = Counter()
        self.gc_seconds: Counter[str] = Counter()

    def as_json(self) -> dict[str, list[list[Any]]]:
        def rows(counter: Counter[Any]) -> list[list[Any]]:
            return [[*(k if isinstance(k, tuple) else (k,)), n] for k, n in counter.items()]

        return {name: rows(getattr(self, name)) for name in vars(self)}


COUNTERS = Counters()


def where() -> str:
    """The route whose request task runs this, or ``<route> (spawned)`` for a task that
    request started (an agent's turn, a live waiter's confirmation, a projector)."""
    route, task = REQUEST.get()
    try:
        current = asyncio.current_task()
    except RuntimeError:
        current = None
    if current is not None and current.get_name() == UPKEEP_TASK:
        return UPKEEP
    if task is None:
        return route
    return route if current is task else f"{route} (spawned)"


def _install_counters() -> None:
    """Observers only: each listener adds one to a counter and returns."""

    def statement(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        COUNTERS.statements[(where(), sql)] += 1

    event.listen(Engine, "before_cursor_execute", statement)
    event.listen(Engine, "commit", lambda _c: COUNTERS.commits.update([where()]))
    event.listen(Engine, "rollback", lambda _c: COUNTERS.rollbacks.update([where()]))
    event.listen(Pool, "checkout", lambda *_: COUNTERS.checkouts.update([where()]))

    for bus in (InMemoryEventBus, NatsEventBus):
        publish = bus.publish

        async def counted(self: Any, evt: Any, _publish: Any = publish) -> None:
            COUNTERS.events[(where(), evt.type)] += 1
            await _publish(self, evt)

        bus.publish = counted  # type: ignore[method-assign]

    call_handlers = logging.Logger.callHandlers

    def counted_log(self: logging.Logger, record: logging.LogRecord) -> None:
        COUNTERS.logs[(record.name, record.levelname)] += 1
        call_handlers(self, record)

    logging.Logger.callHandlers = counted_log  # type: ignore[method-assign]

    started: list[float] = []

    def collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            generation = str(info["generation"])
            COUNTERS.gc_runs[generation] += 1
            COUNTERS.gc_seconds[generation] += time.perf_counter() - started[0]

    gc.callbacks.append(collection)


class RouteTag:
    """Outermost ASGI middleware: the route (ids replaced by ``{id}``) of the work being done."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        route = f"{scope.get('method', 'WS')} {_IDS.sub('/{id}', scope['path'])}"
        COUNTERS.requests[route] += 1
        token = REQUEST.set((route, asyncio.current_task()))
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST.reset(token)


class Sampler:
    """A statistical profiler of the event loop's thread that sees through SQLAlchemy's
    greenlets (cProfile's call stack breaks at each greenlet switch, so its cumulative times
    are wrong there).

    ``SIGPROF`` fires every ``interval`` of the process's CPU time; the handler runs in the main
    thread and records the running stack, continued from each greenlet into its parent's
    suspended frame (``greenlet_spawn`` in the awaiting coroutine), weighted by the main
    thread's CPU time since the previous sample, so time spent in other threads (aiosqlite's)
    is not charged to whatever the loop runs next.
    """

    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.stacks: Counter[tuple[Any, ...]] = Counter()
        self._last = 0.0

    def _sample(self, _signum: int, frame: Any) -> None:
        now = time.thread_time()
        weight, self._last = now - self._last, now
        codes = []
        current = greenlet.getcurrent()
        while True:
            while frame is not None:
                codes.append(frame.f_code)
                frame = frame.f_back
            current = current.parent
            if current is None:
                break
            frame = current.gr_frame
        self.stacks[(where(), *codes)] += weight

    def start(self) -> None:
        self._last = time.thread_time()
        signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)

    def stop(self) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)

    def tables(self) -> tuple[Counter[str], Counter[str], Counter[str]]:
        """Main-thread CPU seconds per function: self (the running function) and inclusive
        (anywhere on the stack, counted once per stack); and per place (``where()``)."""
        own: Counter[str] = Counter()
        inclusive: Counter[str] = Counter()
        places: Counter[str] = Counter()
        for (place, *stack), seconds in self.stacks.items():
            places[place] += seconds
            keys = [_key(code) for code in stack]
            if keys:
                own[keys[0]] += seconds
            for key in set(keys):
                inclusive[key] += seconds
        return own, inclusive, places

    def inclusive_at(self, place: str) -> Counter[str]:
        """Inclusive main-thread CPU seconds per function, of the stacks sampled at ``place``."""
        inclusive: Counter[str] = Counter()
        for (where_, *stack), seconds in self.stacks.items():
            if where_ == place:
                for key in {_key(code) for code in stack}:
                    inclusive[key] += seconds
        return inclusive

    def report(self, out: str, top: int) -> tuple[str, dict[str, list[float]]]:
        own, inclusive, places = self.tables()
        total = sum(own.values()) or 1.0
        lines = [f"sampled main-thread CPU: {total:.3f} s", "", "seconds     share  place"]
        lines += [f"{s:9.3f}  {s / total:6.1%}  {k}" for k, s in places.most_common()]
        lines += ["", "inclusive s   share  function"]
        lines += [f"{s:9.3f}  {s / total:6.1%}  {k}" for k, s in inclusive.most_common()]
        lines += ["", "self s       share  function"]
        lines += [f"{s:9.3f}  {s / total:6.1%}  {k}" for k, s in own.most_common()]
        for place, _ in places.most_common(4):
            lines += ["", f"inclusive s   share  function (only where: {place})"]
            lines += [
                f"{s:9.3f}  {s / total:6.1%}  {k}"
                for k, s in self.inclusive_at(place).most_common(60)
            ]
        with open(out, "w") as file:
            file.write("\n".join(lines) + "\n")
        raw = {k: [0.0, own.get(k, 0.0), inclusive[k]] for k in inclusive}
        raw.update({f"place:{k}": [-1.0, s, s] for k, s in places.items()})
        return "\n".join(lines[: top + 3]), raw


def _key(code: Any) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}({code.co_name})"


class Profiling:
    """One profiler of a kind (``sampler``, ``cprofile`` or ``pyinstrument``), resumed and
    paused around each measured window, reported and dropped once."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._sampler = Sampler() if kind == "sampler" else None
        self._cprofile = cProfile.Profile() if kind == "cprofile" else None
        self._pyinstrument: Any = None
        if kind == "pyinstrument":
            from pyinstrument import Profiler  # type: ignore[import-not-found]

            self._pyinstrument = Profiler(async_mode="disabled")

    def start(self) -> None:
        if self._sampler is not None:
            self._sampler.start()
        elif self._cprofile is not None:
            self._cprofile.enable()
        else:
            self._pyinstrument.start()

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
        elif self._cprofile is not None:
            self._cprofile.disable()
        else:
            self._pyinstrument.stop()  # a later start() adds to the same session

    def report(self, out: str, top: int) -> tuple[str, dict[str, list[float]]]:
        """Write the whole report to ``out``; return its top ``top`` lines and the table
        ``{"file:line(function)": [calls, self seconds, cumulative seconds]}``."""
        if self._sampler is not None:
            return self._sampler.report(out, top)
        if self._cprofile is None:
            text = self._pyinstrument.output_text(unicode=False, color=False)
            with open(out, "w") as file:
                file.write(text)
            return "\n".join(text.splitlines()[: top + 10]), {}
        full = io.StringIO()
        stats = pstats.Stats(self._cprofile, stream=full)
        stats.sort_stats("tottime").print_stats(100)
        stats.print_callers(40)  # who calls the 40 costliest functions (by self time)
        stats.sort_stats("cumulative").print_stats()
        with open(out, "w") as file:
            file.write(full.getvalue())
        shown = io.StringIO()
        pstats.Stats(self._cprofile, stream=shown).sort_stats("tottime").print_stats(top)
        table = {
            f"{file}:{line}({name})": [float(nc), tt, ct]
            for (file, line, name), (_cc, nc, tt, ct, _callers) in stats.stats.items()  # type: ignore[attr-defined]
        }
        return shown.getvalue(), table


def _bench_app(build: Any) -> FastAPI:
    api: FastAPI = build()
    profiling: list[Profiling] = []

    async def stats() -> dict[str, Any]:
        return COUNTERS.as_json()

    async def statements() -> int:
        """The cheap figure the client polls while waiting for the server to go quiet: the
        workers' heartbeat and sweep never do, so their statements are left out."""
        return sum(n for (place, _), n in COUNTERS.statements.items() if place != UPKEEP)

    async def profile_start(body: dict[str, Any]) -> dict[str, str]:
        if not profiling or profiling[0].kind != body["kind"]:
            profiling[:] = [Profiling(str(body["kind"]))]
        profiling[0].start()
        return {"profiler": profiling[0].kind}

    async def profile_stop() -> dict[str, str]:
        profiling[0].stop()
        return {"profiler": profiling[0].kind}

    async def profile_report(body: dict[str, Any]) -> dict[str, Any]:
        done = profiling.pop()
        text, table = done.report(str(body["out"]), int(body.get("top", TOP_FUNCTIONS)))
        return {"profiler": done.kind, "top": text, "raw": table}

    api.add_api_route("/_bench/stats", stats, methods=["GET"])
    api.add_api_route("/_bench/statements", statements, methods=["GET"])
    api.add_api_route("/_bench/profile/start", profile_start, methods=["POST"])
    api.add_api_route("/_bench/profile/stop", profile_stop, methods=["POST"])
    api.add_api_route("/_bench/profile/report", profile_report, methods=["POST"])
    api.add_middleware(RouteTag)
    return api


def main(argv: list[str] | None = None) -> int:
    """``backend.serve.main`` with the observers installed and the bench routes added."""
    _install_counters()
    build = serve.build_app
    serve.build_app = lambda: _bench_app(build)  # type: ignore[assignment]
    return serve.main(argv)


if __name__ == "__main__":
    sys.exit(main())
