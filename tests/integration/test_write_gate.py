"""SQLite's writers queue in this process for the write lock (``backend/db/write_gate.py``):
in the order they asked, without waiting for themselves, and never longer than SQLite's busy
timeout would have made them wait."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.config import Settings
from backend.db import write_gate
from backend.db.engine import create_engine, write_tx


@pytest.fixture
async def sqlite_engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An SQLite engine with a 5 s busy timeout (the gate's patience)."""
    async for engine in _engine(tmp_path, 5000):
        yield engine


@pytest.fixture
async def impatient_engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """An SQLite engine with a 0.3 s busy timeout."""
    async for engine in _engine(tmp_path, 300):
        yield engine


async def _engine(tmp_path: Path, busy_ms: int) -> AsyncIterator[AsyncEngine]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'gate.db'}"
    engine = create_engine(url, Settings(database_url=url, sqlite_busy_timeout_ms=busy_ms))
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE arrivals (n INTEGER)"))
    try:
        yield engine
    finally:
        await engine.dispose()


async def _queued(gate: write_gate.WriteGate, count: int) -> None:
    """Until ``count`` writers wait at ``gate`` (on this loop)."""
    lock = gate._locks[asyncio.get_running_loop()]
    for _ in range(500):
        if len(lock._waiters or ()) >= count:
            return
        await asyncio.sleep(0.002)
    raise AssertionError(f"{count} writers never queued")


async def test_sqlite_writers_take_the_write_lock_in_the_order_they_asked(
    sqlite_engine: AsyncEngine,
) -> None:
    """More writers than pooled connections wait while one holds the lock; each gets it in
    the order it asked, as soon as the one before commits."""
    gate = write_gate.gate_of(sqlite_engine.sync_engine)
    assert gate is not None
    release = asyncio.Event()

    async def holder() -> None:
        async with write_tx(sqlite_engine) as conn:
            await conn.execute(text("INSERT INTO arrivals VALUES (-1)"))
            await release.wait()

    async def writer(n: int) -> None:
        async with write_tx(sqlite_engine) as conn:
            await conn.execute(text("INSERT INTO arrivals VALUES (:n)"), {"n": n})

    holding = asyncio.create_task(holder())
    await _queued_or_held(gate)
    writers = []
    for n in range(8):
        writers.append(asyncio.create_task(writer(n)))
        await _queued(gate, n + 1)
    release.set()
    await asyncio.gather(holding, *writers)
    async with sqlite_engine.connect() as conn:
        order = (await conn.execute(text("SELECT n FROM arrivals ORDER BY rowid"))).scalars()
        assert list(order) == [-1, *range(8)]


async def _queued_or_held(gate: write_gate.WriteGate) -> None:
    """Until the gate's lock on this loop is held."""
    for _ in range(500):
        lock = gate._locks.get(asyncio.get_running_loop())
        if lock is not None and lock.locked():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("the holder never got its turn")


async def test_a_writer_queued_longer_than_the_busy_timeout_gets_sqlites_own_refusal(
    impatient_engine: AsyncEngine,
) -> None:
    """A holder that never lets go: the queued writer gives up queueing after the busy timeout
    and meets SQLite's "database is locked", as it would without the gate; nothing of it is
    written, and the gate serves the next writer once the holder is done."""
    release = asyncio.Event()

    async def holder() -> None:
        async with write_tx(impatient_engine) as conn:
            await conn.execute(text("INSERT INTO arrivals VALUES (1)"))
            await release.wait()

    holding = asyncio.create_task(holder())
    gate = write_gate.gate_of(impatient_engine.sync_engine)
    assert gate is not None
    await _queued_or_held(gate)
    with pytest.raises(OperationalError, match="locked"):
        async with write_tx(impatient_engine) as conn:
            await conn.execute(text("INSERT INTO arrivals VALUES (2)"))
    release.set()
    await holding
    async with write_tx(impatient_engine) as conn:
        await conn.execute(text("INSERT INTO arrivals VALUES (3)"))
    async with impatient_engine.connect() as conn:
        rows = (await conn.execute(text("SELECT n FROM arrivals ORDER BY rowid"))).scalars()
        assert list(rows) == [1, 3]


async def test_a_task_already_holding_its_turn_is_not_queued_behind_itself() -> None:
    """A write opened inside the same task's write (a bug SQLite reports) must not wait for
    its own turn until the patience runs out."""
    gate = write_gate.WriteGate(patience_s=60)

    async def nested() -> None:
        async with gate.turn(), gate.turn():
            pass

    await asyncio.wait_for(nested(), 5)
    async with gate.turn():  # and the turn was handed back
        pass


async def test_a_writer_cancelled_while_queued_leaves_the_queue_to_the_next() -> None:
    gate = write_gate.WriteGate(patience_s=60)
    release = asyncio.Event()
    order: list[str] = []

    async def take(name: str, hold: bool = False) -> None:
        async with gate.turn():
            order.append(name)
            if hold:
                await release.wait()

    first = asyncio.create_task(take("first", hold=True))
    await _queued_or_held(gate)
    gone = asyncio.create_task(take("gone"))
    await _queued(gate, 1)
    last = asyncio.create_task(take("last"))
    await _queued(gate, 2)
    gone.cancel()
    release.set()
    await asyncio.wait_for(asyncio.gather(first, last), 5)
    assert gone.cancelled()
    assert order == ["first", "last"]


async def test_a_postgres_engine_has_no_gate(database_url: str) -> None:
    """PostgreSQL queues lock waiters itself; its writers go straight to the database."""
    engine = create_engine(database_url)
    try:
        gate = write_gate.gate_of(engine.sync_engine)
        assert (gate is None) == (engine.dialect.name == "postgresql")
    finally:
        await engine.dispose()
