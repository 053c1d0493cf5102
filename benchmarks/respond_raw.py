"""The respond path's essential transactions on the bare driver (``sqlite3`` / ``psycopg``).

Why: the benchmark table sets each configuration's latency beside what the same database work
costs without the framework (HTTP, FastAPI, SQLAlchemy, asyncio, events, projections), so the
difference is the overhead a faster respond path could remove. The statements are the ones the
server sends (copied from its statement log, ``benchmarks.respond_server``), with the same JSON
expressions so the same indexes are used:

* **live**: claim (PostgreSQL: ``SELECT ... FOR UPDATE`` of the session, then the
  compare-and-set ``UPDATE ... RETURNING`` that writes the answer and the delivery intent);
  confirm (the intent-keyed ``UPDATE ... RETURNING`` that retires the intent, and the session's
  ``RUNNING`` compare-and-set while the turn is open): 2 transactions.
* **detached**: the same claim; reserve the successor turn (session lock, generation
  compare-and-set, ``INSERT`` of the turn); the attempt mark; publishing the turn (private keys
  cleared); retiring the intent: 5 transactions.

Each answer has its own session holding one pending question in its current, open turn (rows
only, no agents), so answers never contend on a row, as in the HTTP runs. ``C`` threads with a
connection each (PostgreSQL: at most :data:`PG_MAX_CONNECTIONS`) answer their share back to
back; an answer's time covers all of its transactions.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.databases import libpq

PG_MAX_CONNECTIONS = 50
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")

# The authority rule's current turn of session ``{s}`` (backend.authority.sql.current_turn_id).
_CURRENT_TURN = """(SELECT t.id FROM task_session_turns AS t WHERE t.session_id = {s} AND
 (NOT {flag_pending} OR {flag_attempted} OR EXISTS (SELECT * FROM task_session_messages
 WHERE task_session_messages.turn_id = t.id))
 ORDER BY t.started_at DESC, t.created_at DESC, t.id DESC LIMIT 1)"""


@dataclass(frozen=True)
class Dialect:
    """The few spellings that differ: placeholders, JSON access and merge, locking."""

    name: str
    mark: str
    lock: str | None

    def text(self, key: str, column: str = "metadata") -> str:
        if self.name == "sqlite":
            return f"json_extract({column}, '$.{key}')"
        return f"({column} ->> '{key}')"

    def flag(self, key: str, column: str) -> str:
        if self.name == "sqlite":
            return f"(coalesce({self.text(key, column)} IN (1, '1', 'true'), 0) = 1)"
        return f"(coalesce({self.text(key, column)} IN ('true', '1'), false))"

    def merge(self, removed: tuple[str, ...] = ()) -> str:
        """``metadata`` merged with a JSON patch parameter (keys in ``removed`` dropped)."""
        if self.name == "sqlite":
            return f"json_patch(metadata, {self.mark})"
        target = "metadata"
        for key in removed:
            target = f"({target} - '{key}')"
        return f"({target} || CAST({self.mark} AS JSONB))"

    def statements(self) -> dict[str, str]:
        m = self.mark
        current = _CURRENT_TURN.format(
            s=m,
            flag_pending=self.flag("prompt_dispatch_pending", "t.metadata"),
            flag_attempted=self.flag("prompt_dispatch_attempted", "t.metadata"),
        )
        returning = "RETURNING id, session_id, task_id, turn_id, type, author, content, metadata"
        terminal = ", ".join(f"'{s}'" for s in TERMINAL)
        return {
            "lock": f"SELECT id FROM task_sessions WHERE id = {m} FOR UPDATE",
            "claim": f"UPDATE task_session_messages SET metadata = CASE WHEN id = {m} THEN "
            f"{self.merge()} ELSE metadata END WHERE session_id = {m} AND "
            f"{self.text('pending_id')} = {m} AND type = 'clarification_request' AND "
            f"({self.text('status')} IS NULL OR {self.text('status')} = 'pending') AND "
            f"(nullif(turn_id, '') IS NULL OR turn_id = {current}) AND id IN ({m}) {returning}",
            "finalize": f"UPDATE task_session_messages SET metadata = "
            f"{self.merge(('delivery_intent', 'delivery_path'))} WHERE "
            f"{self.text('pending_id')} = {m} AND {self.text('delivery_intent')} = {m} "
            f"{returning}",
            "running": f"UPDATE task_sessions SET state = 'RUNNING', updated_at = {m} WHERE "
            f"id = {m} AND prompt_generation = {m} AND state NOT IN ({terminal}) AND EXISTS "
            f"(SELECT * FROM task_session_turns WHERE task_session_turns.id = {m} AND "
            f"task_session_turns.completed_at IS NULL) RETURNING id",
            "admit": f"UPDATE task_sessions SET state = 'RUNNING', prompt_generation = "
            f"prompt_generation + 1, updated_at = {m} WHERE id = {m} AND state IN "
            f"('IDLE', 'WAITING_FOR_INPUT', 'CREATED') AND prompt_generation = {m} "
            f"RETURNING task_id, prompt_generation",
            "turn": "INSERT INTO task_session_turns (id, session_id, task_id, prompt_generation, "
            f"started_at, created_at, metadata) VALUES ({', '.join([m] * 7)})",
            "attempt": f"UPDATE task_session_turns SET metadata = json_patch(metadata, {m}) "
            f"WHERE id = {m} AND {self.flag('prompt_dispatch_pending', 'metadata')} "
            "RETURNING id"
            if self.name == "sqlite"
            else f"UPDATE task_session_turns SET metadata = {self.merge()} WHERE id = {m} AND "
            f"{self.flag('prompt_dispatch_pending', 'metadata')} RETURNING id",
            "publish": f"UPDATE task_session_turns SET metadata = "
            f"{self.merge(('prompt_dispatch_pending', 'prompt_dispatch_attempted'))} "
            f"WHERE id = {m} RETURNING id",
        }


SQLITE = Dialect("sqlite", "?", None)
POSTGRES = Dialect("postgres", "%s", "lock")


@dataclass
class RawResult:
    mode: str
    clients: int
    connections: int
    latencies: list[float]
    wall_s: float


@dataclass(frozen=True)
class Question:
    session_id: str
    task_id: str
    turn_id: str
    message_id: str
    pending_id: str


def _id() -> str:
    return uuid.uuid4().hex


def _now(dialect: Dialect) -> Any:
    now = datetime.now(UTC)
    return now.replace(tzinfo=None).isoformat(" ", "microseconds") if dialect is SQLITE else now


def seed(connect: Callable[[], Any], dialect: Dialect, count: int) -> list[Question]:
    """One workspace and ``count`` tasks, each with a session waiting on one question."""
    con = connect()
    m, now = dialect.mark, _now(dialect)
    ws, wf, step = _id(), _id(), _id()
    cur = con.cursor()
    if dialect is SQLITE:
        cur.execute("BEGIN")
    cur.execute(
        f"INSERT INTO workspaces (id, name, created_at) VALUES ({m}, {m}, {m})", (ws, "raw", now)
    )
    cur.execute(
        f"INSERT INTO workflows (id, workspace_id, name, created_at) VALUES ({m}, {m}, {m}, {m})",
        (wf, ws, "raw", now),
    )
    cur.execute(
        f"INSERT INTO workflow_steps (id, workflow_id, name, position) VALUES ({m}, {m}, {m}, 0)",
        (step, wf, "Backlog"),
    )
    questions = [Question(_id(), _id(), _id(), _id(), _id()) for _ in range(count)]
    cur.executemany(
        "INSERT INTO tasks (id, workspace_id, workflow_id, workflow_step_id, title, description, "
        f"state, created_at, updated_at) VALUES ({m}, {m}, {m}, {m}, 'raw', '', 'TODO', {m}, {m})",
        [(q.task_id, ws, wf, step, now, now) for q in questions],
    )
    cur.executemany(
        "INSERT INTO task_sessions (id, task_id, state, is_primary, agent_profile, "
        f"prompt_generation, created_at, updated_at) VALUES ({m}, {m}, 'WAITING_FOR_INPUT', "
        f"TRUE, 'mock', 1, {m}, {m})",
        [(q.session_id, q.task_id, now, now) for q in questions],
    )
    cur.executemany(
        "INSERT INTO task_session_turns (id, session_id, task_id, prompt_generation, started_at, "
        f"created_at, metadata) VALUES ({m}, {m}, {m}, 1, {m}, {m}, '{{}}')",
        [(q.turn_id, q.session_id, q.task_id, now, now) for q in questions],
    )
    cur.executemany(
        "INSERT INTO task_session_messages (id, session_id, task_id, turn_id, type, author, "
        f"content, metadata, created_at) VALUES ({m}, {m}, {m}, {m}, 'clarification_request', "
        f"'agent', 'Which?', {m}, {m})",
        [
            (q.message_id, q.session_id, q.task_id, q.turn_id, _question_metadata(q), now)
            for q in questions
        ],
    )
    con.commit()
    con.close()
    return questions


def _question_metadata(q: Question) -> str:
    return json.dumps(
        {
            "pending_id": q.pending_id,
            "status": "pending",
            "question": "Which?",
            "position": 0,
            "options": [{"id": "o1", "label": "yes"}, {"id": "o2", "label": "no"}],
        }
    )


def answer(con: Any, dialect: Dialect, sql: dict[str, str], q: Question, mode: str) -> None:
    """One answer's transactions; raises when a compare-and-set misses (a broken run)."""
    intent = _id()
    patch = {
        "status": "answered",
        "answer": {"option_ids": ["o1"], "option_labels": ["yes"], "text": "", "question": "?"},
        "delivery_intent": intent,
        "delivery_path": mode,
    }

    def tx(*steps: tuple[str, tuple[Any, ...]]) -> None:
        cur = con.cursor()
        if dialect is SQLITE:
            cur.execute("BEGIN IMMEDIATE")
        for name, params in steps:
            cur.execute(sql[name], params)
            if name != "turn" and not cur.fetchall():
                raise RuntimeError(f"{name} changed nothing")
        con.commit()

    claim = (
        "claim",
        (q.message_id, json.dumps(patch), q.session_id, q.pending_id, q.session_id, q.message_id),
    )
    lock = [("lock", (q.session_id,))] if dialect.lock else []
    tx(*lock, claim)
    finalize = (
        "finalize",
        (
            json.dumps({"delivery_intent": None, "delivery_path": None})
            if dialect is SQLITE
            else "{}",
            q.pending_id,
            intent,
        ),
    )
    if mode == "live":
        tx(finalize, ("running", (_now(dialect), q.session_id, 1, q.turn_id)))
        return
    turn = _id()
    meta = {"prompt_dispatch_pending": True, "source_pending_id": q.pending_id}
    tx(
        *lock,
        ("admit", (_now(dialect), q.session_id, 1)),
        (
            "turn",
            (turn, q.session_id, q.task_id, 2, _now(dialect), _now(dialect), json.dumps(meta)),
        ),
    )
    tx(("attempt", (json.dumps({"prompt_dispatch_attempted": True}), turn)))
    cleared = {"prompt_dispatch_pending": None, "prompt_dispatch_attempted": None}
    tx(("publish", (json.dumps(cleared) if dialect is SQLITE else "{}", turn)))
    tx(finalize)


def run(
    connect: Callable[[], Any], dialect: Dialect, questions: list[Question], mode: str, clients: int
) -> RawResult:
    """``clients`` threads answer ``questions`` (thread ``i`` takes ``i``, ``i + C``, ...)."""
    threads_n = min(clients, PG_MAX_CONNECTIONS) if dialect is POSTGRES else clients
    sql = dialect.statements()
    latencies: list[float] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n + 1)

    def worker(i: int) -> None:
        con = connect()
        try:
            mine = questions[i::threads_n]
            barrier.wait()
            for q in mine:
                began = time.perf_counter()
                answer(con, dialect, sql, q, mode)
                latencies.append(time.perf_counter() - began)
        except BaseException as error:
            errors.append(error)
        finally:
            con.close()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads_n)]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"bare-driver run failed: {errors[0]!r}") from errors[0]
    return RawResult(mode, clients, threads_n, latencies, wall)


def sqlite_connector(path: Path) -> Callable[[], sqlite3.Connection]:
    """Connections set up like the product's engine (WAL, busy timeout, foreign keys,
    synchronous=NORMAL, explicit BEGINs)."""

    def connect() -> sqlite3.Connection:
        con = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        for pragma in (
            "journal_mode=WAL",
            "busy_timeout=10000",
            "foreign_keys=ON",
            "synchronous=NORMAL",
        ):
            con.execute(f"PRAGMA {pragma}")
        return con

    return connect


def postgres_connector(url: str) -> Callable[[], psycopg.Connection[Any]]:
    """Connections like the product's (``jit=off``)."""
    return lambda: psycopg.connect(libpq(url), options="-c jit=off")
