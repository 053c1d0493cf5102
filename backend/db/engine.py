"""Engines and transactions.

All database work runs on SQLAlchemy's asyncio engines (aiosqlite for SQLite, psycopg 3 for
PostgreSQL) so no query blocks the event loop. Alembic alone uses a synchronous engine, and
only from the CLI or a worker thread.

SQLite's driver-level transaction handling is replaced by explicit ``BEGIN`` statements: reads
use deferred transactions, while :func:`write_tx` takes the write lock up front
(``BEGIN IMMEDIATE``) so a read-then-write transaction never fails on a lock upgrade.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from backend.config import Settings, get_settings
from backend.db import postgres_pool, sqlite_driver, write_gate

_SQLITE_BEGIN = "kandev_sqlite_begin"


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def sync_url(url: str) -> str:
    """The synchronous-driver form of ``url`` (for Alembic)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.set(drivername="sqlite").render_as_string(hide_password=False)
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def async_url(url: str) -> str:
    """The asyncio-driver form of ``url``; plain ``sqlite:``/``postgresql:`` URLs are accepted."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite").render_as_string(hide_password=False)
    return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)


def _ensure_sqlite_dir(url: str) -> None:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def configure_sqlite(sync_engine: Any, busy_timeout_ms: int) -> None:
    """WAL, a busy timeout, foreign keys and explicit BEGINs on every SQLite connection."""

    @event.listens_for(sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = conn.get_execution_options().get(_SQLITE_BEGIN, "DEFERRED")
        # Through SQLAlchemy, not the driver directly: a failure or a cancellation here must
        # reach its error handling, which invalidates the connection (a cancelled BEGIN
        # IMMEDIATE may still take the write lock on the connection's thread afterwards).
        conn.exec_driver_sql(f"BEGIN {mode}")


def create_engine(url: str, settings: Settings | None = None) -> AsyncEngine:
    settings = settings or get_settings()
    url = async_url(url)
    if is_sqlite(url):
        _ensure_sqlite_dir(url)
        # One thread round trip per statement, none for check-out and check-in
        # (backend/db/sqlite_driver.py). The pool's pre-ping and reset-on-return are replaced
        # by trip-free hooks: a pooled aiosqlite connection stopped underneath the pool
        # (aiosqlite's terminate path, taken when a check-in is cancelled) is still replaced
        # at check-out instead of failing the next transaction with "no active connection".
        engine = create_async_engine(
            url,
            module=sqlite_driver.OneTripDbapi(),
            pool_size=settings.db_pool_size,
            max_overflow=0,
            pool_pre_ping=False,
            pool_reset_on_return=None,
        )
        sqlite_driver.install_pool_hooks(engine.sync_engine)
        configure_sqlite(engine.sync_engine, settings.sqlite_busy_timeout_ms)
        write_gate.install(engine.sync_engine, settings.sqlite_busy_timeout_ms / 1000)
        return engine
    # JIT compilation costs tens of milliseconds per statement and never pays off for the
    # short index-driven queries this application runs. The pre-ping's round trip per
    # check-out is replaced by a local look at the socket (backend/db/postgres_pool.py).
    engine = create_async_engine(
        url,
        pool_size=settings.db_pool_size,
        max_overflow=0,
        pool_pre_ping=False,
        connect_args={"options": "-c jit=off"},
    )
    postgres_pool.install_pool_hooks(engine.sync_engine)
    return engine


@lru_cache(maxsize=1)
def get_engine() -> AsyncEngine:
    """The process-wide engine for the configured database URL."""
    return create_engine(get_settings().database_url)


@asynccontextmanager
async def read_tx(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A transaction for reads: one consistent snapshot, no write lock."""
    async with engine.connect() as conn, conn.begin():
        yield conn


@asynccontextmanager
async def write_tx(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A transaction that writes; on SQLite it holds the write lock from its first statement,
    and this process's writers queue for that lock in order (``backend/db/write_gate.py``)."""
    gate = write_gate.gate_of(engine.sync_engine)
    async with contextlib.AsyncExitStack() as stack:
        if gate is not None:
            await stack.enter_async_context(gate.turn())
        conn = await stack.enter_async_context(engine.connect())
        if conn.dialect.name == "sqlite":
            conn = await conn.execution_options(**{_SQLITE_BEGIN: "IMMEDIATE"})
        async with conn.begin():
            yield conn
