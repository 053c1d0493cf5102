"""The projection epoch is allocated in the database and only grows; revisions from the
process's clock (local on SQLite, shared by every worker on PostgreSQL) only grow too."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from sqlalchemy import delete

from backend.db.engine import create_engine, write_tx
from backend.models import KandevMeta
from backend.projections.revision import (
    DatabaseNotMigratedError,
    SharedRevisionClock,
    allocate_epoch,
    start_clock,
)

_ALLOCATE = (
    "import asyncio, sys\n"
    "from backend.db.engine import create_engine\n"
    "from backend.projections.revision import allocate_epoch\n"
    "async def main():\n"
    "    engine = create_engine(sys.argv[1])\n"
    "    print(await allocate_epoch(engine))\n"
    "    await engine.dispose()\n"
    "asyncio.run(main())\n"
)


async def test_epoch_grows_across_engine_restarts(database_url, engine):
    before = await allocate_epoch(engine)
    restarted = create_engine(database_url)
    try:
        after = await allocate_epoch(restarted)
    finally:
        await restarted.dispose()
    assert after > before


async def test_concurrent_starts_get_distinct_growing_epochs(database_url, engine):
    floor = await allocate_epoch(engine)
    engines = [create_engine(database_url) for _ in range(6)]
    try:
        epochs = await asyncio.gather(*(allocate_epoch(e) for e in engines))
    finally:
        await asyncio.gather(*(e.dispose() for e in engines))
    assert len(set(epochs)) == len(epochs)
    assert min(epochs) > floor


async def test_concurrent_processes_get_distinct_epochs(database_url, engine):
    floor = await allocate_epoch(engine)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _ALLOCATE, database_url, stdout=subprocess.PIPE
        )
        for _ in range(4)
    ]
    outputs = [await p.communicate() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    epochs = [int(out.strip()) for out, _ in outputs]
    assert len(set(epochs)) == 4 and min(epochs) > floor


async def test_a_clocks_revisions_grow_and_a_restarted_clock_goes_on_above_them(engine):
    clock = await start_clock(engine)
    revisions = [await clock.reserve() for _ in range(3)]
    assert revisions == sorted(revisions)
    assert len(set(revisions)) == 3
    newer_clock = await start_clock(engine)
    assert await newer_clock.reserve() > revisions[-1]


async def test_workers_on_postgresql_share_one_revision_order(database_url, engine):
    """Two workers' clocks interleave into one order: a read that starts later on either
    worker gets the newer revision, whichever worker started first."""
    if engine.dialect.name != "postgresql":
        pytest.skip("several workers serve PostgreSQL only")
    second = create_engine(database_url)
    try:
        first_clock, second_clock = await start_clock(engine), await start_clock(second)
        assert isinstance(first_clock, SharedRevisionClock)
        assert first_clock.epoch == second_clock.epoch
        order = [
            await clock.reserve() for clock in (first_clock, second_clock) * 3 + (first_clock,)
        ]
        assert order == sorted(order) and len(set(order)) == len(order)
    finally:
        await second.dispose()


async def test_missing_epoch_row_is_a_clear_error(database_url):
    engine = create_engine(database_url)
    meta = KandevMeta.__table__
    try:
        async with write_tx(engine) as conn:
            saved = (await conn.execute(meta.select())).mappings().all()
            await conn.execute(delete(meta))
        with pytest.raises(DatabaseNotMigratedError):
            await allocate_epoch(engine)
    finally:
        async with write_tx(engine) as conn:
            await conn.execute(meta.insert(), [dict(row) for row in saved])
        await engine.dispose()
