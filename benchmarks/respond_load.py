"""The respond benchmark's load: backend processes, a pool of sessions, rounds of answers.

Why rounds: a session holds at most one answerable question at a time, and every session is
one agent process, so questions cannot be staged in thousands. Instead a fixed pool of sessions
is reused. Each round first **arms** questions (untimed: a prompt ``/ask ...`` per session,
then polling until the bundle is ``active_live``, or ``active_detached`` with its turn paused),
then **fires**: the clients start together and each answers its own share of the armed
questions back to back (client ``i`` takes questions ``i``, ``i + C``, ...), only the respond
call being timed; then the round **settles** until the servers' statement counters stop
moving, so each answer's aftermath (the live waiter's confirmation, the agent's ``Got: ...``
and end of turn, the summary projector) is counted with it and not with the next round.
CPU is read from ``/proc`` for the server's event-loop thread, its other threads (aiosqlite's),
its agent processes, PostgreSQL's processes and this client.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import httpx
import psycopg

from backend.db.engine import create_engine
from benchmarks.databases import libpq
from tests.support.builders import World
from tests.support.processes import BackendProcess

STATE = {"live": "active_live", "detached": "active_detached"}
OUTCOME = {"live": "delivered", "detached": "resumed"}
POLL_S = 0.05
ARM_DEADLINE_S = 60.0
SETTLE_QUIET_S = 0.3
SETTLE_MAX_S = 30.0
ARMING_CONCURRENCY = 4
SWEEP_S = 0.2
TICK = os.sysconf("SC_CLK_TCK")
Cpu = dict[str, float]


class BenchServer(BackendProcess):
    """``backend.serve`` through the counting launcher (``benchmarks.respond_server``)."""

    name = "respond-backend"
    #: Every server process (= process group, with its agents) ever started: the last-resort
    #: cleanup of an interrupted run kills what is left of them.
    started: ClassVar[set[int]] = set()

    async def start(self) -> None:
        try:
            await super().start()
        finally:
            if self._proc is not None:
                BenchServer.started.add(self._proc.pid)

    def command(self) -> list[str]:
        return [sys.executable, "-m", "benchmarks.respond_server", "--port", str(self.port)]

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid


def percentile(values: list[float], q: float) -> float:
    """Nearest rank, like ``benchmarks.timing.p95``: always a measured value."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# -- CPU from /proc ---------------------------------------------------------------------------


def _stat(path: str) -> list[str] | None:
    """Fields 3.. of a ``stat`` file (index 0 = state), or None for a process gone."""
    try:
        with open(path) as file:
            text = file.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _own(fields: list[str]) -> float:
    return (int(fields[11]) + int(fields[12])) / TICK


def _reaped(fields: list[str]) -> float:
    return (int(fields[13]) + int(fields[14])) / TICK


def postmaster_pid(url: str) -> int | None:
    """PostgreSQL's parent process (its backends' parent), when it runs on this machine."""
    with psycopg.connect(libpq(url)) as con:
        backend = con.execute("SELECT pg_backend_pid()").fetchone()
        fields = _stat(f"/proc/{backend[0]}/stat") if backend else None
    return int(fields[1]) if fields else None


def cpu_snapshot(server_pids: list[int], postmaster: int | None) -> Cpu:
    """Cumulative CPU seconds: servers' loop thread, their other threads, their agents (live
    and reaped), PostgreSQL (postmaster, its children, reaped ones) and this process."""
    out = dict.fromkeys(("server loop", "server threads", "agents", "postgres"), 0.0)
    groups, parents = set(server_pids), {postmaster}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(f"/proc/{entry}/stat")
        if fields is None:
            continue
        pid, ppid, pgrp = int(entry), int(fields[1]), int(fields[2])
        if pid in groups:
            loop = _stat(f"/proc/{pid}/task/{pid}/stat")
            main = _own(loop) if loop else 0.0
            out["server loop"] += main
            out["server threads"] += _own(fields) - main
            out["agents"] += _reaped(fields)
        elif pgrp in groups:
            out["agents"] += _own(fields)
        elif pid == postmaster:
            out["postgres"] += _own(fields) + _reaped(fields)
        elif ppid in parents:
            out["postgres"] += _own(fields)
    times = os.times()
    out["client"] = times.user + times.system
    return out


def cpu_diff(after: Cpu, before: Cpu) -> Cpu:
    return {key: after[key] - before[key] for key in after}


# -- the servers' counters --------------------------------------------------------------------

Counts = dict[str, Counter[tuple[str, ...]]]


def parse_counts(body: dict[str, Any]) -> Counts:
    return {
        name: Counter({tuple(row[:-1]): row[-1] for row in rows})
        for name, rows in body.items()
        if isinstance(rows, list)
    }


def counts_diff(after: Counts, before: Counts) -> Counts:
    return {name: after[name] - before.get(name, Counter()) for name in after}


def counts_add(total: Counts, more: Counts) -> None:
    for name, counter in more.items():
        total.setdefault(name, Counter()).update(counter)


# -- one database, one set of workers ---------------------------------------------------------


@dataclass
class Measured:
    """One configuration's measured rounds, summed."""

    db: str
    workers: int
    mode: str
    clients: int
    latencies: list[float] = field(default_factory=list)
    fire_s: float = 0.0
    settle_s: float = 0.0
    cpu_fire: Cpu = field(default_factory=dict)
    cpu_total: Cpu = field(default_factory=dict)
    counts: Counts = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    raw: Any = None  # the bare-driver figures (benchmarks.respond_raw.RawResult)

    def add_cpu(self, target: Cpu, more: Cpu) -> None:
        for key, value in more.items():
            target[key] = target.get(key, 0.0) + value


class Bench:
    """Started servers, their HTTP clients and the session pool, on one database."""

    def __init__(self, db: str, url: str, workers: int, log_dir: Path, nats_url: str) -> None:
        self.db, self.url, self.workers, self.log_dir = db, url, workers, log_dir
        # The product's acknowledgement deadline (the tests' 3 s is too short for an agent
        # process starting while dozens of others are being started on 2 cores).
        extra = {"KANDEV_AGENTCTL_ACK_TIMEOUT_S": "10"}
        if workers > 1:
            extra["KANDEV_NATS_URL"] = nats_url
        self.servers = [
            BenchServer(log_dir, url, log_dir / "agent-record.jsonl", **extra)
            for _ in range(workers)
        ]
        self.http: list[httpx.AsyncClient] = []
        self.sessions: list[str] = []
        self.seen: set[str] = set()
        self.postmaster = postmaster_pid(url) if db == "postgres" else None
        self._serial = 0

    async def start(self) -> None:
        for server in self.servers:  # one by one: start-up recovery must not race itself
            await server.start()
        limits = httpx.Limits(max_connections=512, max_keepalive_connections=512)
        self.http = [
            httpx.AsyncClient(base_url=s.url, timeout=120, limits=limits) for s in self.servers
        ]

    async def close(self) -> None:
        for http in self.http:
            await http.aclose()
        await asyncio.gather(*(s.stop() for s in self.servers), return_exceptions=True)

    def cpu(self) -> Cpu:
        return cpu_snapshot([s.pid for s in self.servers if s.running], self.postmaster)

    async def counts(self) -> Counts:
        total: Counts = {}
        for http in self.http:
            counts_add(total, parse_counts((await http.get("/_bench/stats")).json()))
        return total

    async def create_sessions(self, count: int) -> None:
        """``count`` sessions (one agent process each), on the workers in turn."""
        engine = create_engine(self.url)
        try:
            world = World(engine)
            tasks = [await world.task(f"bench {i}") for i in range(count)]
        finally:
            await engine.dispose()
        gate = asyncio.Semaphore(2)

        async def one(i: int, task: str) -> str:
            async with gate:
                response = await self.http[i % self.workers].post(
                    f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "/reply ready"}
                )
            if response.status_code != 201:
                raise RuntimeError(f"session not created: {response.text}")
            return str(response.json()["id"])

        self.sessions = list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))

    async def _prompt(self, index: int, mode: str, deadline: float) -> None:
        """Prompt session ``index`` to ask one question (retrying while its turn ends)."""
        http, session = self.http[index % self.workers], self.sessions[index]
        self._serial += 1
        script = f"/ask Bench question {self._serial}? | yes | no"
        if mode == "detached":
            script += "\n/disconnect"
        while True:
            response = await http.post(
                f"/api/v1/task-sessions/{session}/prompt", json={"content": script}
            )
            if response.status_code == 202:
                return
            if response.status_code != 409 or time.monotonic() > deadline:
                raise RuntimeError(f"prompt refused: {response.status_code} {response.text}")
            await asyncio.sleep(POLL_S)

    async def _ready(self, index: int, mode: str) -> dict[str, Any] | None:
        """The session's new bundle once answerable in ``mode`` (detached: with the turn that
        asked it paused, its last write, as ``tests.support.http.detached_bundle`` waits)."""
        http, session = self.http[index % self.workers], self.sessions[index]
        body = (await http.get(f"/api/v1/task-sessions/{session}/clarifications")).json()
        fresh = [
            b
            for b in body["bundles"]
            if b["state"] == STATE[mode] and b["pending_id"] not in self.seen
        ]
        if not fresh:
            return None
        if mode == "detached":
            turns = (await http.get(f"/api/v1/task-sessions/{session}/turns")).json()["turns"]
            if not turns or turns[-1]["completed_at"] is None:
                return None
        return dict(fresh[0])

    async def arm(self, mode: str, count: int) -> list[dict[str, Any]]:
        """One question in each of the first ``count`` sessions: all prompts first, then sweeps
        over the sessions not ready yet, with few polls in flight so that polling does not
        crowd out the agents' asking."""
        deadline = time.monotonic() + ARM_DEADLINE_S
        gate = asyncio.Semaphore(ARMING_CONCURRENCY)

        async def gated(work: Any) -> Any:
            async with gate:
                return await work

        await asyncio.gather(*(gated(self._prompt(i, mode, deadline)) for i in range(count)))
        armed: dict[int, dict[str, Any]] = {}
        waiting = list(range(count))
        while waiting:
            await asyncio.sleep(SWEEP_S)
            found = await asyncio.gather(*(gated(self._ready(i, mode)) for i in waiting))
            for index, bundle in zip(waiting, found, strict=True):
                if bundle is not None:
                    armed[index] = bundle
                    self.seen.add(bundle["pending_id"])
            waiting = [i for i in waiting if i not in armed]
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"{len(waiting)} sessions never asked in {mode} mode")
        return [armed[i] for i in range(count)]

    async def fire(
        self, mode: str, clients: int, bundles: list[dict[str, Any]], errors: list[str]
    ) -> tuple[list[float], float]:
        """Every client answers its share back to back; returns the latencies and the wall
        time from the common start to the last answer."""
        start = asyncio.Event()
        latencies: list[float] = []

        async def client(i: int) -> None:
            work = [(b["pending_id"], _answer(b)) for b in bundles[i::clients]]
            await start.wait()
            for k, (pending_id, body) in enumerate(work):
                # Clients start round-robin over the workers and move on by one per answer,
                # so with several workers answers often reach one without the agent's wait.
                http = self.http[(i + k) % self.workers]
                began = time.perf_counter()
                response = await http.post(f"/api/v1/clarification/{pending_id}/respond", json=body)
                latencies.append(time.perf_counter() - began)
                if response.status_code != 200 or response.json()["outcome"] != OUTCOME[mode]:
                    errors.append(f"{response.status_code} {response.text}")

        tasks = [asyncio.create_task(client(i)) for i in range(clients)]
        await asyncio.sleep(0)  # every client reaches start.wait() first
        began = time.perf_counter()
        start.set()
        await asyncio.gather(*tasks)
        return latencies, time.perf_counter() - began

    async def settle(self) -> float:
        """Wait until no server ran a statement for ``SETTLE_QUIET_S``; returns the wait."""
        began = time.perf_counter()
        last, quiet_since = -1, began
        while time.perf_counter() - began < SETTLE_MAX_S:
            total = 0
            for http in self.http:
                total += int((await http.get("/_bench/statements")).json())
            now = time.perf_counter()
            if total != last:
                last, quiet_since = total, now
            elif now - quiet_since >= SETTLE_QUIET_S:
                return quiet_since - began
            await asyncio.sleep(0.1)
        return time.perf_counter() - began

    async def prime(self, mode: str) -> list[str]:
        """One untimed answer in every session: an agent's first answer costs it a one-off
        start-up (about 40 ms of agent CPU per answer in the first row otherwise), and the
        server's statement caches fill. Returns the errors."""
        errors: list[str] = []
        bundles = await self.arm(mode, len(self.sessions))
        await self.fire(mode, len(self.sessions), bundles, errors)
        await self.settle()
        return errors

    async def measure(
        self, mode: str, clients: int, answers: int, warmup: int, profile: str | None = None
    ) -> Measured:
        """Warm-up rounds (``warmup`` answers), then rounds of up to one question per session
        until ``answers`` were timed. ``profile``: a profiler of that kind runs in the first
        server during the measured fire-and-settle windows only."""
        result = Measured(self.db, self.workers, mode, clients)
        pool = len(self.sessions)
        plan = [(min(pool, n), False) for n in _chunks(warmup, pool)]
        plan += [(min(pool, n), True) for n in _chunks(answers, pool)]
        for count, measured in plan:
            bundles = await self.arm(mode, count)
            if not measured:
                await self.fire(mode, clients, bundles, result.errors)
                await self.settle()
                continue
            if profile:
                await self.http[0].post("/_bench/profile/start", json={"kind": profile})
            counts, cpu0 = await self.counts(), self.cpu()
            latencies, wall = await self.fire(mode, clients, bundles, result.errors)
            cpu1 = self.cpu()
            result.settle_s += await self.settle()
            cpu2 = self.cpu()
            if profile:
                await self.http[0].post("/_bench/profile/stop")
            counts_add(result.counts, counts_diff(await self.counts(), counts))
            result.latencies += latencies
            result.fire_s += wall
            result.add_cpu(result.cpu_fire, cpu_diff(cpu1, cpu0))
            result.add_cpu(result.cpu_total, cpu_diff(cpu2, cpu0))
        return result


def _chunks(total: int, size: int) -> list[int]:
    return [min(size, total - done) for done in range(0, total, size)]


def _answer(bundle: dict[str, Any]) -> dict[str, Any]:
    """The first option of every question (``tests.support.http.answer_all``'s shape)."""
    return {
        "answers": [
            {"message_id": q["message_id"], "option_ids": [q["options"][0]["id"]], "text": ""}
            for q in bundle["questions"]
        ]
    }
