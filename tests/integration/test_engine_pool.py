"""The engine's pool: a driver connection stopped or closed underneath it is replaced, and
SQLite's trips to its connection thread are one per statement."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from backend.db.engine import create_engine, write_tx


async def test_a_stopped_sqlite_connection_in_the_pool_is_replaced(tmp_path: Path) -> None:
    """aiosqlite's terminate path stops a connection's thread (closing it) while SQLAlchemy may
    still pool it; the next transaction must get a working connection, not "no active
    connection" (a CI failure in a test that merely truncated tables)."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'pool.db'}")
    try:
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            driver = raw.driver_connection
            await conn.execute(text("SELECT 1"))
        stopped = driver.stop()  # the pooled connection is closed underneath the pool
        if stopped is not None:
            await stopped
        async with write_tx(engine) as conn:
            assert (await conn.execute(text("SELECT 2"))).scalar_one() == 2
    finally:
        await engine.dispose()


def _count_trips(driver: Any) -> list[int]:
    """Count the calls handed to an aiosqlite connection's thread from now on."""
    queue = driver._tx
    counter = [0]
    put = queue.put_nowait

    class Counting:
        def put_nowait(self, item: Any) -> None:
            counter[0] += 1
            put(item)

        def __getattr__(self, name: str) -> Any:
            return getattr(queue, name)

    driver._tx = Counting()
    return counter


async def test_a_sqlite_statement_is_one_trip_and_check_in_after_commit_is_free(
    tmp_path: Path,
) -> None:
    """Each trip to aiosqlite's thread wakes the event loop: a transaction of N statements
    costs BEGIN + N + COMMIT trips, with no ping at check-out and no ROLLBACK at check-in."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'trips.db'}")
    try:
        async with write_tx(engine) as conn:
            await conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"))
            driver = (await conn.get_raw_connection()).driver_connection
        trips = _count_trips(driver)
        async with write_tx(engine) as conn:
            inserted = await conn.execute(text("INSERT INTO t (v) VALUES ('a'), ('b')"))
            rows = (await conn.execute(text("SELECT id, v FROM t ORDER BY id"))).all()
            changed = await conn.execute(text("UPDATE t SET v = 'c' WHERE id = 2"))
        assert trips[0] == 1 + 3 + 1
        assert rows == [(1, "a"), (2, "b")]
        assert (inserted.rowcount, changed.rowcount) == (2, 1)
        assert inserted.lastrowid == 2
    finally:
        await engine.dispose()


async def test_a_sqlite_transaction_left_open_is_rolled_back_at_check_in(
    tmp_path: Path,
) -> None:
    """The check-in ROLLBACK is skipped only when SQLite has no transaction open: a
    connection handed back mid-transaction (its work abandoned below SQLAlchemy's
    transaction object) is rolled back, so the next user neither sees nor keeps its writes."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'reset.db'}")
    try:
        async with write_tx(engine) as conn:
            await conn.execute(text("CREATE TABLE t (v TEXT)"))

        def abandon(sync_conn: Any) -> bool:
            adapted = sync_conn.connection.dbapi_connection
            cursor = adapted.cursor()
            cursor.execute("BEGIN IMMEDIATE")
            cursor.execute("INSERT INTO t VALUES ('abandoned')")
            return bool(adapted.in_transaction())

        def still_open(sync_conn: Any) -> bool:
            return bool(sync_conn.connection.dbapi_connection.in_transaction())

        async with engine.connect() as conn:
            assert await conn.run_sync(abandon)
        async with engine.connect() as conn:
            assert not await conn.run_sync(still_open)
            assert (await conn.execute(text("SELECT count(*) FROM t"))).scalar_one() == 0
    finally:
        await engine.dispose()


async def test_a_postgres_connection_the_server_closed_is_replaced(database_url: str) -> None:
    """Without a pre-ping, a pooled connection the server has since closed (a restart, an
    administrator's ``pg_terminate_backend``) is still never handed to a transaction: the
    check-out sees the closed socket and the pool opens a new connection."""
    if not database_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL server closing a pooled connection")
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        admin = create_engine(database_url)
        async with write_tx(admin) as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        await admin.dispose()
        await asyncio.sleep(0.2)  # the server's goodbye reaches the pooled socket
        async with write_tx(engine) as conn:
            again = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        assert again != pid
    finally:
        await engine.dispose()


async def test_a_cancelled_sqlite_begin_leaves_no_write_lock_behind(tmp_path: Path) -> None:
    """A writer cancelled while its ``BEGIN IMMEDIATE`` waits for the write lock: the BEGIN
    still runs to its end on the connection's thread, so the connection must be discarded
    (not pooled holding the lock); the next writer gets through."""
    path = tmp_path / "cancel.db"
    engine = create_engine(f"sqlite+aiosqlite:///{path}")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        async with write_tx(engine) as conn:
            await conn.execute(text("CREATE TABLE t (v TEXT)"))
        holder.execute("BEGIN IMMEDIATE")

        async def write() -> None:
            async with write_tx(engine) as conn:
                await conn.execute(text("INSERT INTO t VALUES ('cancelled')"))

        waiting = asyncio.create_task(write())
        await asyncio.sleep(0.3)  # its BEGIN IMMEDIATE waits for the holder
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        holder.execute("COMMIT")  # the abandoned BEGIN may take the lock now
        async with asyncio.timeout(5):
            async with write_tx(engine) as conn:
                await conn.execute(text("INSERT INTO t VALUES ('next')"))
        async with write_tx(engine) as conn:
            assert (await conn.execute(text("SELECT v FROM t"))).scalars().all() == ["next"]
    finally:
        holder.close()
        await engine.dispose()
