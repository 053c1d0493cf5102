"""A witness for SQLite ``database is locked`` errors in the test suite.

SQLite names no culprit when a writer waits out the busy timeout. The witness keeps, for every
pooled connection of an engine, who checked it out (asyncio task or thread, where, when) and
whether it is inside a transaction and of which kind. When a statement fails with
``database is locked`` it writes all of that, with the current stack of every asyncio task and
thread, to stderr (so it lands in the failing test's captured output) and to
``tests/artifacts/locks/``. It changes nothing about how statements run.
"""

from __future__ import annotations

import asyncio
import gc
import io
import os
import sqlite3
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.ext.asyncio import AsyncEngine

ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "locks"


@dataclass
class _Use:
    dbapi: Any
    owner: str
    since: float
    where: list[str]
    tx_mode: str | None = None
    tx_since: float | None = None
    history: list[str] = field(default_factory=list)


def _owner() -> str:
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    thread = threading.current_thread().name
    return f"task {task.get_name()} ({id(task):#x})" if task else f"thread {thread}"


def _where() -> list[str]:
    """The caller's own frames: the asyncio task's coroutine chain (SQLAlchemy runs pool
    events inside a greenlet, whose stack does not reach the application), else the thread's."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    frames = (
        [(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) for f in task.get_stack()]
        if task
        else [(f.filename, f.lineno, f.name) for f in traceback.extract_stack()]
    )
    own = [f for f in frames if "site-packages" not in f[0] and "/lib/" not in f[0]]
    return [f"{Path(name).name}:{line} {func}" for name, line, func in own[-8:]]


def attach(engine: AsyncEngine) -> None:
    """Start witnessing ``engine``'s connections (SQLite only; a no-op elsewhere)."""
    sync = engine.sync_engine
    if sync.dialect.name != "sqlite":
        return
    uses: dict[int, _Use] = {}

    @event.listens_for(sync, "checkout")
    def _checkout(dbapi: Any, _record: Any, _proxy: Any) -> None:
        uses[id(dbapi)] = _Use(dbapi, _owner(), time.monotonic(), _where())

    @event.listens_for(sync, "checkin")
    def _checkin(dbapi: Any, _record: Any) -> None:
        if dbapi is not None:
            uses.pop(id(dbapi), None)

    @event.listens_for(sync, "begin")
    def _begin(conn: Connection) -> None:
        use = uses.get(id(conn.connection.dbapi_connection))
        if use is not None:
            use.tx_mode = conn.get_execution_options().get("kandev_sqlite_begin", "DEFERRED")
            use.tx_since = time.monotonic()
            use.history.append(f"begin {use.tx_mode} by {_owner()} at {_where()[-3:]}")

    def _end(conn: Connection) -> None:
        use = uses.get(id(conn.connection.dbapi_connection))
        if use is not None:
            use.history.append(f"end {use.tx_mode} by {_owner()}")
            use.tx_mode = use.tx_since = None

    event.listen(sync, "commit", _end)
    event.listen(sync, "rollback", _end)

    @event.listens_for(sync, "handle_error")
    def _on_error(context: ExceptionContext) -> None:
        if "database is locked" in str(context.original_exception):
            _report(uses, context.statement)


def _sqlite_in_transaction(dbapi: Any) -> Any:
    raw = getattr(getattr(dbapi, "_connection", None), "_conn", None)
    return getattr(raw, "in_transaction", "?")


def _safe_in_tx(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.ProgrammingError:  # closed
        return False


def _report(uses: dict[int, _Use], statement: str | None) -> None:
    now = time.monotonic()
    out = io.StringIO()
    out.write(f"=== lock witness: {statement!r} failed with 'database is locked'\n")
    out.write(f"--- {len(uses)} checked-out connection(s)\n")
    for key, use in uses.items():
        tx = f"{use.tx_mode} for {now - use.tx_since:.1f}s" if use.tx_since else "no transaction"
        sqlite_tx = _sqlite_in_transaction(use.dbapi)
        out.write(f"* conn {key:#x}: {use.owner}, out {now - use.since:.1f}s, {tx}")
        out.write(f", sqlite in_transaction={sqlite_tx}\n")
        out.write(f"  checked out at: {use.where}\n")
        for line in use.history[-6:]:
            out.write(f"  {line}\n")
    open_tx = [c for c in gc.get_objects() if isinstance(c, sqlite3.Connection)]
    busy = [c for c in open_tx if _safe_in_tx(c)]
    out.write(f"--- sqlite3 connections alive: {len(open_tx)}, in a transaction: {len(busy)}\n")
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:
        tasks = set()
    out.write(f"--- {len(tasks)} asyncio task(s)\n")
    for task in tasks:
        stack = task.get_stack(limit=12)
        frames = [
            f"{Path(f.f_code.co_filename).name}:{f.f_lineno} {f.f_code.co_name}" for f in stack
        ]
        out.write(f"* {task.get_name()} ({id(task):#x}): {frames}\n")
    out.write("--- threads\n")
    names = {t.ident: t.name for t in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        lines = traceback.format_stack(frame, limit=6)
        out.write(f"* {names.get(ident, ident)}:\n{''.join(lines)}")
    out.write(f"--- pid {os.getpid()}\n")
    text = out.getvalue()
    sys.stderr.write(text)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"lock-{os.getpid()}-{time.time_ns()}.txt").write_text(text)
