"""The benchmarks' data set: a deterministic workspace at production size, row by row.

``projection`` and ``boot`` time reads over the same rows, so they share this generator: one
seeded ``random.Random`` makes every choice, which is what lets two runs (or two databases, or
code before and after a change) be compared on identical data. Rows are plain tuples in the
column order of ``benchmarks.databases`` (the loaders write them as they are), with times as
integer microseconds after ``T0`` until they are written; ``Data.intended`` is what the
generator meant each session's pending action to be, which ``benchmarks.reference`` checks
its own reading of the rule against.
"""

from __future__ import annotations

import base64
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

SEED = 20260101

# Vocabulary, spelled out here on purpose: the generator and the reference rule
# (benchmarks.reference) must not reuse backend code.
CLARIFICATION = "clarification_request"
PERMISSION = "permission_request"
TERMINAL = frozenset({"COMPLETED", "FAILED", "CANCELLED"})
TRUE_FORMS: tuple[Any, ...] = (True, "true", "1", 1)
FALSE_FORMS: tuple[Any, ...] = (False, "false", "0", 0)

SEC = 1_000_000  # times are integer microseconds after T0 until they are written
MINUTE = 60 * SEC
HOUR = 60 * MINUTE
DAY = 24 * HOUR
T0 = datetime(2026, 1, 1)  # naive UTC, as SQLite stores it


def sqlite_time(us: int | None) -> str | None:
    """SQLAlchemy's SQLite DATETIME storage format (naive UTC, always with microseconds)."""
    return None if us is None else (T0 + timedelta(microseconds=us)).isoformat(" ", "microseconds")


def pg_time(us: int | None) -> str | None:
    """A ``timestamptz`` literal in UTC, as ``COPY`` reads it."""
    return None if us is None else (T0 + timedelta(microseconds=us)).isoformat(" ") + "+00"


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
    """One workspace's rows, kept in memory: the loaders write them and the reference rule and
    the checks read them back."""

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
        """The workspace: ``n_tasks`` tasks of ``per_task`` sessions, exactly ``n_messages``."""
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

    def session(self, task_id: str, created: int, primary: bool, quota: int, empty: bool) -> None:
        """One session with its turns, request bundles and ordinary messages."""
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
        """A turn's metadata JSON for its reservation role, in the flag forms seen in the wild."""
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
