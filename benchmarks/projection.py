#!/usr/bin/env python
"""Benchmark of the task-list pending-action projection at production size.

Builds a realistic, deterministic data set (by default 10,000 tasks, 30,000 sessions and
1,000,000 messages) in a temporary SQLite file and/or a scratch PostgreSQL database, checks
that :func:`backend.authority.session_authority` returns exactly what the spec rule says
(recomputed here in plain Python from the generated rows), then times

* ``repository``: ``read_tx`` + ``session_authority`` + ``task_pending_actions`` on the
  product's async engine, and
* ``raw``: the very same SQL statement (captured from ``session_authority`` and compiled with
  literal binds for the dialect) executed through the sync driver, fetching all rows.

Run ``python benchmarks/projection.py --help``; see ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import itemgetter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from sqlalchemy import event, select  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402
from sqlalchemy.ext.asyncio import AsyncEngine  # noqa: E402

from backend.authority import (  # noqa: E402
    session_authority,
    session_pending_actions,
    task_pending_actions,
)
from backend.authority.sql import sessions  # noqa: E402
from backend.db.engine import create_engine, read_tx  # noqa: E402
from backend.db.migrate import upgrade  # noqa: E402
from backend.models import Task  # noqa: E402

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
SEED = 20260101
SQLITE_TARGET_MS = 250.0
RATIO_TARGET = 1.3

# Vocabulary, spelled out here on purpose: the reference rule below must not reuse backend code.
CLARIFICATION = "clarification_request"
PERMISSION = "permission_request"
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED"})
TRUE_FORMS: tuple[Any, ...] = (True, "true", "1", 1)
FALSE_FORMS: tuple[Any, ...] = (False, "false", "0", 0)
RANK_ACTION = {0: "clarification", 1: "permission"}

SEC = 1_000_000  # times are integer microseconds after T0 until they are written
MINUTE = 60 * SEC
HOUR = 60 * MINUTE
DAY = 24 * HOUR
T0 = datetime(2026, 1, 1)  # naive UTC, as SQLite stores it

WORKSPACE_COLS = ("id", "name", "created_at")
WORKFLOW_COLS = ("id", "workspace_id", "name", "created_at")
STEP_COLS = ("id", "workflow_id", "name", "position")
TASK_COLS = (
    "id",
    "workspace_id",
    "workflow_id",
    "workflow_step_id",
    "title",
    "description",
    "state",
    "created_at",
    "updated_at",
)
SESSION_COLS = (
    "id",
    "task_id",
    "state",
    "is_primary",
    "agent_profile",
    "prompt_generation",
    "pending_action",
    "created_at",
    "updated_at",
)
TURN_COLS = (
    "id",
    "session_id",
    "task_id",
    "prompt_generation",
    "started_at",
    "completed_at",
    "created_at",
    "metadata",
)
MESSAGE_COLS = (
    "id",
    "session_id",
    "task_id",
    "turn_id",
    "type",
    "author",
    "content",
    "metadata",
    "created_at",
)


# --------------------------------------------------------------------------------------------
# Deterministic data generation
# --------------------------------------------------------------------------------------------

_CROCKFORD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "0123456789ABCDEFGHJKMNPQRSTVWXYZ")
_T0_MS = int((T0 - datetime(1970, 1, 1)).total_seconds() * 1000)


class IdMaker:
    """ULID-shaped ids (time prefix + 80 seeded random bits), like ``backend.ids.new_id``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def __call__(self, when_us: int) -> str:
        value = ((_T0_MS + when_us // 1000) << 80) | self.rng.getrandbits(80)
        return base64.b32encode(value.to_bytes(20, "big")).decode().translate(_CROCKFORD)[-26:]


_WORDS = (  # noqa: SIM905 (a sentence reads better than a list of words)
    "the test suite fails on the migration step because the index is missing so I will add it "
    "and rerun pytest then check the logs for the retry loop in the worker and update docs "
    "refactor handler config parse error token stream file path branch commit review diff"
).split()


@dataclass
class Data:
    workspace_id: str
    workspaces: list[tuple[Any, ...]]
    workflows: list[tuple[Any, ...]]
    steps: list[tuple[Any, ...]]
    tasks: list[tuple[Any, ...]]
    sessions: list[tuple[Any, ...]]
    turns: list[tuple[Any, ...]]
    messages: list[tuple[Any, ...]]
    #: What the generator meant each session's pending action to be.
    intended: dict[str, str | None]
    scenario_counts: Counter[str] = field(default_factory=Counter)


class Generator:
    """Builds the rows; every choice comes from one seeded ``random.Random``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.new_id = IdMaker(self.rng)
        self.contents = [
            " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(6, 90)))
            for _ in range(1024)
        ]
        self.plain_meta = [json.dumps({"tokens": self.rng.randint(10, 4000)}) for _ in range(64)]
        self.counts: Counter[str] = Counter()
        self.turns: list[tuple[Any, ...]] = []
        self.messages: list[tuple[Any, ...]] = []
        self.sessions: list[tuple[Any, ...]] = []
        self.intended: dict[str, str | None] = {}
        self.debt = 0  # messages over budget so far

    def build(self, n_tasks: int, per_task: int, n_messages: int) -> Data:
        rng, new_id = self.rng, self.new_id
        ws, wf = new_id(0), new_id(0)
        workspaces = [(ws, "Bench workspace", 0)]
        workflows = [(wf, ws, "Default", 0)]
        steps = [
            (new_id(0), wf, name, i)
            for i, name in enumerate(("Backlog", "In progress", "Review", "Done"))
        ]
        n_sessions = n_tasks * per_task
        # A few brand-new sessions have no turn yet; the rest share the message budget with a
        # heavy-tailed spread (most sessions are short, a few are very chatty).
        empty = [rng.random() < 0.01 for _ in range(n_sessions)]
        weights = [0.0 if e else rng.lognormvariate(0, 0.8) for e in empty]
        total = sum(weights) or 1.0
        quotas = [int(n_messages * w / total) for w in weights]
        busy = [i for i, e in enumerate(empty) if not e]
        for k in range(n_messages - sum(quotas)):
            quotas[busy[k % len(busy)]] += 1

        tasks = []
        span = 180 * DAY
        for t in range(n_tasks):
            created = t * span // max(n_tasks, 1) + rng.randrange(MINUTE)
            task_id = new_id(created)
            step = rng.choice(steps)[0]
            tasks.append(
                (
                    task_id,
                    ws,
                    wf,
                    step,
                    f"Task {t}: " + " ".join(rng.choice(_WORDS) for _ in range(5)),
                    rng.choice(self.contents),
                    rng.choice(("TODO", "IN_PROGRESS", "REVIEW", "DONE")),
                    created,
                    created,
                )
            )
            for k in range(per_task):
                index = t * per_task + k
                self.session(task_id, created + k * 5 * MINUTE, k == 0, quotas[index], empty[index])
        self.messages.sort(key=itemgetter(8))  # inserted in global chronological order
        return Data(
            workspace_id=ws,
            workspaces=workspaces,
            workflows=workflows,
            steps=steps,
            tasks=tasks,
            sessions=self.sessions,
            turns=self.turns,
            messages=self.messages,
            intended=self.intended,
            scenario_counts=self.counts,
        )

    # One session with its turns, request bundles and ordinary messages.
    def session(self, task_id: str, created: int, primary: bool, quota: int, empty: bool) -> None:
        rng, new_id, count = self.rng, self.new_id, self.counts
        sid = new_id(created)
        terminal_roll = rng.random()
        terminal = (
            "COMPLETED"
            if terminal_roll < 0.03
            else "FAILED"
            if terminal_roll < 0.045
            else "CANCELLED"
            if terminal_roll < 0.06
            else None
        )
        if empty:
            count["session: no turn yet"] += 1
            self.sessions.append(
                (sid, task_id, "CREATED", primary, "mock", 0, None, created, created)
            )
            self.intended[sid] = None
            return

        # Turn times (a few clock ties exercise the created_at and id tie-breaks).
        n = rng.randint(3, 6)
        clock = created + rng.randrange(1, 600) * SEC
        raw: list[tuple[int, int, str]] = []
        for j in range(n):
            if j and rng.random() < 0.03:
                started, made = raw[-1][0], raw[-1][1]
                if rng.random() < 0.5:
                    made += 1000
                count["turn: started_at tie"] += 1
            else:
                clock += rng.randrange(MINUTE, 4 * HOUR)
                started = made = clock
            raw.append((started, made, new_id(made)))
        raw.sort()  # the rule's order: (started_at, created_at, id)

        # Turn roles: the newest may be a reservation in one of its states; older ones are
        # published, with the odd stale reservation left behind by a crash.
        roles = ["published"] * n
        for j in range(1, n - 1):
            if rng.random() < 0.01:
                roles[j] = "stale"
        roll = rng.random()
        roles[-1] = (
            "reserved"  # unpublished, never attempted: not authoritative
            if roll < 0.04
            else "attempted"  # unpublished but attempted: authoritative
            if roll < 0.07
            else "evidenced"  # unpublished, yet messages reference it: authoritative
            if roll < 0.08
            else "failed_attempt"  # unpublished, attempted flag false-ish: not authoritative
            if roll < 0.10
            else "released"  # reservation published (pending flag false-ish): authoritative
            if roll < 0.13
            else "published"
        )
        count[f"newest turn: {roles[-1]}"] += 1
        authoritative = [r in ("published", "attempted", "evidenced", "released") for r in roles]
        talkative = [r in ("published", "evidenced", "released") for r in roles]
        current = max(j for j in range(n) if authoritative[j])
        older = [j for j in range(current) if authoritative[j]]
        windows = [
            (raw[j][0], (raw[j + 1][0] if j + 1 < n else raw[j][0] + HOUR) - raw[j][0] or SEC)
            for j in range(n)
        ]
        turn_ids = [r[2] for r in raw]
        for j, (started, made, tid) in enumerate(raw):
            meta = self.turn_meta(roles[j])
            completed = started + windows[j][1] // 2 if j < n - 1 else None
            self.turns.append((tid, sid, task_id, j + 1, started, completed, made, meta))

        # Request bundles.
        requests: list[tuple[str, str, dict[str, Any], int]] = []  # turn_id, type, meta, time

        def at_turn(j: int) -> int:
            start, width = windows[j]
            return start + rng.randrange(width)

        def bundle(kind: str, type_: str, rows: list[tuple[int | None, str]], **extra: Any) -> None:
            """rows: (turn index or None for a legacy "" id, status or "missing")."""
            count[f"bundle: {kind}"] += 1
            pid = new_id(created)
            for i, (j, status) in enumerate(rows):
                meta: dict[str, Any] = {"pending_id": pid}
                if status != "missing":
                    meta["status"] = status
                if type_ == CLARIFICATION:
                    meta["question_index"] = i
                else:
                    meta["tool"] = rng.choice(("bash", "edit", "web_fetch"))
                if i == 0:
                    meta.update(extra)
                when = at_turn(j if j is not None else current)
                requests.append(("" if j is None else turn_ids[j], type_, meta, when))

        def pending_statuses(k: int) -> list[str]:
            statuses = rng.choices(("pending", "missing", "answered"), (60, 15, 25), k=k)
            if not any(s in ("pending", "missing") for s in statuses):
                statuses[0] = "pending"
            return statuses

        def size() -> int:
            return rng.choice((1, 1, 2, 2, 3))

        pending_now = rng.random() < (0.5 if roles[current] == "evidenced" else 0.11)
        if pending_now:
            k = size()
            rows: list[tuple[int | None, str]] = [(current, s) for s in pending_statuses(k)]
            if k > 1 and rng.random() < 0.15:
                rows[-1] = (None, rows[-1][1])  # legacy sibling: "" does not mask the turn
                count["bundle: current, with legacy sibling"] += 1
            extra = {"agent_disconnected": True} if rng.random() < 0.05 else {}
            bundle("pending in current turn", CLARIFICATION, rows, **extra)
        if older and rng.random() < 0.08:
            j = rng.choice(older)
            bundle("pending, superseded", CLARIFICATION, [(j, s) for s in pending_statuses(size())])
        if rng.random() < 0.25:
            j = rng.choice([i for i in range(n) if talkative[i]])
            statuses = rng.choices(("answered", "rejected"), (85, 15), k=size())
            bundle("answered/rejected", CLARIFICATION, [(j, s) for s in statuses])
        if rng.random() < 0.01:
            bundle(
                "pending, delivery claimed",
                CLARIFICATION,
                [(current, s) for s in pending_statuses(size())],
                delivery_intent={"answer": "yes", "requested_at": "2026-01-01T00:00:00Z"},
            )
        if older and rng.random() < 0.005:
            bundle(
                "pending, conflicting turns",
                CLARIFICATION,
                [(current, "pending"), (rng.choice(older), "pending")],
            )
        if rng.random() < 0.01:
            bundle("pending, legacy only", CLARIFICATION, [(None, "pending")] * size())
        permission_now = rng.random() < 0.015
        if permission_now:
            bundle("permission pending in current turn", PERMISSION, [(current, "pending")])
        if rng.random() < 0.15:
            j = rng.choice([i for i in range(n) if talkative[i]])
            status = rng.choice(("answered", "rejected"))
            bundle("permission answered/rejected", PERMISSION, [(j, status)])

        # Ordinary messages fill the rest of this session's share.
        chatty = [j for j in range(n) if talkative[j]]
        # Sessions whose request rows exceed their share borrow from the next ones, so the
        # total stays exactly --messages.
        floor = 1 if roles[current] == "evidenced" else 0
        plain = max(quota - len(requests) - self.debt, floor)
        self.debt += plain + len(requests) - quota
        for m in range(plain):
            j = current if m == 0 and roles[current] == "evidenced" else rng.choice(chatty)
            when = at_turn(j)
            legacy = rng.random() < 0.01 and roles[j] != "evidenced"
            self.messages.append(
                (
                    new_id(when),
                    sid,
                    task_id,
                    "" if legacy else turn_ids[j],
                    "status" if rng.random() < 0.05 else "message",
                    "user" if rng.random() < 0.15 else "agent",
                    rng.choice(self.contents),
                    "{}" if rng.random() < 0.92 else rng.choice(self.plain_meta),
                    when,
                )
            )
        for turn_id, type_, meta, when in requests:
            self.messages.append(
                (
                    new_id(when),
                    sid,
                    task_id,
                    turn_id,
                    type_,
                    "agent",
                    "Which option should I take?" if type_ == CLARIFICATION else "Run tool?",
                    json.dumps(meta),
                    when,
                )
            )

        intended = (
            None
            if terminal is not None
            else "clarification"
            if pending_now
            else "permission"
            if permission_now
            else None
        )
        self.intended[sid] = intended
        if terminal is not None:
            state = terminal
        elif intended is not None:
            state = "WAITING_FOR_INPUT" if rng.random() < 0.9 else "RUNNING"
        else:
            state = rng.choices(
                ("IDLE", "RUNNING", "STARTING", "WAITING_FOR_INPUT"), (75, 20, 3, 2)
            )[0]
        # The cached column is derived data; leave it stale now and then (it is never read).
        cached = intended if rng.random() < 0.98 else rng.choice((None, "clarification"))
        updated = raw[-1][0]
        self.sessions.append((sid, task_id, state, primary, "mock", n, cached, created, updated))

    def turn_meta(self, role: str) -> str:
        rng = self.rng
        if role == "published":
            if rng.random() < 0.9:
                return "{}"
            return json.dumps({"usage": {"input_tokens": rng.randint(100, 90_000)}})
        if role in ("reserved", "stale", "evidenced"):
            return json.dumps({"prompt_dispatch_pending": rng.choice(TRUE_FORMS)})
        if role == "attempted":
            return json.dumps(
                {
                    "prompt_dispatch_pending": rng.choice(TRUE_FORMS),
                    "prompt_dispatch_attempted": rng.choice(TRUE_FORMS),
                }
            )
        if role == "failed_attempt":
            return json.dumps(
                {
                    "prompt_dispatch_pending": rng.choice(TRUE_FORMS),
                    "prompt_dispatch_attempted": rng.choice(FALSE_FORMS),
                }
            )
        if role == "released":
            meta: dict[str, Any] = {"prompt_dispatch_pending": rng.choice(FALSE_FORMS)}
            if rng.random() < 0.5:
                meta["prompt_dispatch_attempted"] = rng.choice(TRUE_FORMS)
            return json.dumps(meta)
        raise AssertionError(role)


# --------------------------------------------------------------------------------------------
# The reference rule, in plain Python over the generated rows
# --------------------------------------------------------------------------------------------


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return value in ("true", "1") or (isinstance(value, int) and value == 1)


@dataclass
class Expected:
    session: dict[str, tuple[str | None, str | None]]  # session -> (current turn, action)
    task: dict[str, str | None]


def reference_rule(data: Data) -> Expected:
    referenced = {m[3] for m in data.messages}
    newest: dict[str, tuple[int, int, str]] = {}
    for tid, sid, _task, _gen, started, _completed, made, meta_json in data.turns:
        meta = json.loads(meta_json)
        authoritative = (
            not _truthy(meta.get("prompt_dispatch_pending"))
            or _truthy(meta.get("prompt_dispatch_attempted"))
            or tid in referenced
        )
        key = (started, made, tid)
        if authoritative and (sid not in newest or key > newest[sid]):
            newest[sid] = key
    current = {sid: key[2] for sid, key in newest.items()}

    bundles: dict[tuple[str, str, str], list[tuple[str | None, dict[str, Any]]]] = defaultdict(list)
    for m in data.messages:
        if m[4] in (CLARIFICATION, PERMISSION):
            meta = json.loads(m[7])
            if meta.get("pending_id") is not None:
                bundles[(m[1], meta["pending_id"], m[4])].append((m[3], meta))
    state = {s[0]: s[2] for s in data.sessions}
    actions: dict[str, set[str]] = defaultdict(set)
    for (sid, _pid, type_), rows in bundles.items():
        identity = {turn for turn, _ in rows if turn}
        if (
            len(identity) == 1
            and current.get(sid) in identity
            and any(meta.get("status") in (None, "pending") for _, meta in rows)
            and not any(meta.get("delivery_intent") is not None for _, meta in rows)
            and state[sid] not in TERMINAL
        ):
            actions[sid].add(type_)

    def action(sid: str) -> str | None:
        found = actions.get(sid, set())
        return (
            "clarification"
            if CLARIFICATION in found
            else "permission"
            if PERMISSION in found
            else None
        )

    per_session = {s[0]: (current.get(s[0]), action(s[0])) for s in data.sessions}
    per_task: dict[str, str | None] = {}
    for s in data.sessions:
        a, best = per_session[s[0]][1], per_task.get(s[1])
        if best is None or (a == "clarification" and best == "permission"):
            per_task[s[1]] = a
        else:
            per_task.setdefault(s[1], best)
    return Expected(per_session, per_task)


def compare(
    label: str,
    got: dict[str, tuple[str | None, str | None]],
    expected: dict[str, tuple[str | None, str | None]],
    data: Data,
) -> list[str]:
    """Human-readable differences (empty when ``got`` is right)."""
    problems = []
    if len(got) != len(expected):
        problems.append(f"{label}: {len(got)} sessions returned, {len(expected)} expected")
    wrong = [sid for sid in expected if got.get(sid) != expected[sid]]
    if wrong:
        turns_of: dict[str, list[str]] = defaultdict(list)
        wanted = set(wrong[:5])
        for t in data.turns:
            if t[1] in wanted:
                turns_of[t[1]].append(
                    f"{t[0]} started={_sqlite_time(t[4])} created={_sqlite_time(t[6])} "
                    f"metadata={t[7]}"
                )
        kinds = Counter(
            ("turn" if got.get(s, (None,))[0] != expected[s][0] else "action") for s in wrong
        )
        clarifying = sum(1 for _, a in got.values() if a == "clarification")
        wanted_n = sum(1 for _, a in expected.values() if a == "clarification")
        problems.append(
            f"{label}: {len(wrong)} sessions differ from the reference rule "
            f"(current turn differs: {kinds['turn']}, only the action differs: {kinds['action']}); "
            f"sessions pending clarification: got {clarifying}, expected {wanted_n}"
        )
        for sid in wrong[:5]:
            problems.append(f"  session {sid}: got {got.get(sid)}, expected {expected[sid]}")
            problems.extend(f"    turn {line}" for line in turns_of[sid])
    return problems


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def _sqlite_time(us: int | None) -> str | None:
    # SQLAlchemy's SQLite DATETIME storage format (naive UTC, always with microseconds).
    return None if us is None else (T0 + timedelta(microseconds=us)).isoformat(" ", "microseconds")


def _pg_time(us: int | None) -> str | None:
    return None if us is None else (T0 + timedelta(microseconds=us)).isoformat(" ") + "+00"


TIME_COLUMNS = ("created_at", "updated_at", "started_at", "completed_at")


def _tables(data: Data) -> list[tuple[str, tuple[str, ...], list[tuple[Any, ...]]]]:
    return [
        ("workspaces", WORKSPACE_COLS, data.workspaces),
        ("workflows", WORKFLOW_COLS, data.workflows),
        ("workflow_steps", STEP_COLS, data.steps),
        ("tasks", TASK_COLS, data.tasks),
        ("task_sessions", SESSION_COLS, data.sessions),
        ("task_session_turns", TURN_COLS, data.turns),
        ("task_session_messages", MESSAGE_COLS, data.messages),
    ]


def _converted(
    cols: tuple[str, ...], rows: Iterable[tuple[Any, ...]], fmt: Callable[[Any], Any]
) -> Iterator[tuple[Any, ...]]:
    times = [i for i, c in enumerate(cols) if c in TIME_COLUMNS]
    for row in rows:
        out = list(row)
        for i in times:
            out[i] = fmt(out[i])
        yield tuple(out)


def load_sqlite(path: Path, data: Data) -> None:
    upgrade(f"sqlite:///{path}")
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("PRAGMA cache_size=-262144")
        con.execute("BEGIN")
        for name, cols, rows in _tables(data):
            marks = ", ".join("?" for _ in cols)
            con.executemany(
                f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({marks})",
                _converted(cols, rows, _sqlite_time),
            )
        con.execute("COMMIT")
        con.execute("ANALYZE")
        con.execute("PRAGMA journal_mode=WAL")  # what the product's engine uses
    finally:
        con.close()


def load_postgres(url: str, data: Data) -> None:
    upgrade(url)
    with psycopg.connect(libpq(url)) as con:
        with con.cursor() as cur:
            for name, cols, rows in _tables(data):
                with cur.copy(f"COPY {name} ({', '.join(cols)}) FROM STDIN") as copy:
                    for row in _converted(cols, rows, _pg_time):
                        copy.write_row(row)
        con.commit()
        con.autocommit = True
        con.execute("VACUUM ANALYZE")


def libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def shown(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


# --------------------------------------------------------------------------------------------
# The statement, and the two ways of running it
# --------------------------------------------------------------------------------------------

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
    repository: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)


def median(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


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
    return {
        r.session_id: (r.current_turn_id, r.pending_action.value if r.pending_action else None)
        for r in rows
    }


def expected_none_or(action: Any) -> str | None:
    return action.value if action is not None else None


def by_task_raw(rows: list[tuple[Any, ...]]) -> dict[str, str | None]:
    return {r[0]: RANK_ACTION.get(r[1]) for r in rows}


@dataclass
class Result:
    database: str
    tasks: int
    sessions: int
    messages: int
    load_s: float
    timings: Timings
    verified: bool
    problems: list[str]
    counts: Counter[str]


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


def bench_sqlite(data: Data, expected: Expected, args: argparse.Namespace) -> Result:
    workdir = Path(tempfile.mkdtemp(prefix="kandev_bench_"))
    path = workdir / "bench.db"
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
        for node, parent, _unused, detail in raw.execute("EXPLAIN QUERY PLAN " + sql, params or ()):
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
        if args.keep:
            print(f"[sqlite] kept {path}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return result("sqlite", data, load_s, timings, problems, counts)


def bench_postgres(data: Data, expected: Expected, args: argparse.Namespace) -> Result | None:
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
    name = f"kandev_bench_{uuid.uuid4().hex[:10]}"
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
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
    finally:
        if args.keep:
            print(f"[postgres] kept database {name}: {shown(url)}")
        else:
            with psycopg.connect(libpq(server), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return result("postgres", data, load_s, timings, problems, counts)


def result(
    name: str,
    data: Data,
    load_s: float,
    timings: Timings,
    problems: list[str],
    counts: Counter[str],
) -> Result:
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
    mismatch = [s for s, (_, a) in expected.session.items() if a != data.intended[s]]
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

    results: list[Result] = []
    if args.db in ("sqlite", "both"):
        results.append(bench_sqlite(data, expected, args))
    if args.db in ("postgres", "both"):
        pg = bench_postgres(data, expected, args)
        if pg is not None:
            results.append(pg)
        elif args.db == "postgres":
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
