"""Who owns unfinished durable work, and who recovers it (``backend/workers.py``).

PostgreSQL with several workers: a starting worker settles only the leftovers of workers that
are gone (their advisory lock went with their connection), never the live work of another
worker. SQLite: one process per database, a second one is refused at start-up."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import select

from backend.db.engine import read_tx
from backend.db.tables import turns
from backend.events import InMemoryEventBus
from backend.orchestrator.admission import DISPATCH_UNACKNOWLEDGED
from backend.recovery import recover
from backend.workers import (
    WORKER_KEY,
    OtherProcessHoldsDatabase,
    PresenceLost,
    SingleProcessLock,
    WorkerPresence,
    worker_id,
)
from tests.support.builders import World
from tests.support.postgres import cut_worker_lock_connection

_OTHER_WORKER = (
    "import asyncio, sys\n"
    "from backend.db.engine import create_engine\n"
    "from backend.workers import worker_id, WorkerPresence, SingleProcessLock\n"
    "async def main():\n"
    "    engine = create_engine(sys.argv[1])\n"
    "    held = WorkerPresence(engine) if sys.argv[2] == 'pg' else SingleProcessLock(engine)\n"
    "    await held.start()\n"
    "    print(worker_id(), flush=True)\n"
    "    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)\n"
    "asyncio.run(main())\n"
)


async def _other_process(database_url: str, kind: str) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _OTHER_WORKER,
        database_url,
        kind,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 30)
    return process, line.decode().strip()


async def _kill(
    other: asyncio.subprocess.Process, other_id: str = "", observer: WorkerPresence | None = None
) -> None:
    """kill -9 the other worker: its connection, and with it its lock, goes at once (as
    ``observer`` sees within seconds)."""
    if other.returncode is None:
        other.kill()
        await other.wait()
    for _ in range(100 if observer else 0):
        if other_id not in await observer.live_workers():
            break
        await asyncio.sleep(0.05)


@pytest.fixture
async def two_workers(
    database_url, engine
) -> AsyncIterator[tuple[WorkerPresence, asyncio.subprocess.Process, str]]:
    """This test's worker and another worker process (its id): both hold their locks."""
    if engine.dialect.name != "postgresql":
        pytest.skip("several workers serve PostgreSQL only")
    here = WorkerPresence(engine)
    await here.start()
    other, other_id = await _other_process(database_url, "pg")
    try:
        yield here, other, other_id
    finally:
        await _kill(other)
        await here.stop()


async def _unacknowledged_turn(world: World, owner: str) -> str:
    session = await world.session()
    return await world.turn(session, 1, meta={DISPATCH_UNACKNOWLEDGED: True, WORKER_KEY: owner})


async def _failed(engine, turn_id: str) -> bool:
    async with read_tx(engine) as conn:
        completed = (
            await conn.execute(select(turns.c.completed_at).where(turns.c.id == turn_id))
        ).scalar_one()
    return completed is not None


async def test_a_starting_worker_recovers_only_the_work_of_workers_that_are_gone(
    engine, two_workers: tuple[WorkerPresence, asyncio.subprocess.Process, str]
):
    here, other, other_id = two_workers
    assert {worker_id(), other_id} <= await here.live_workers()
    world = World(engine)
    live_work = await _unacknowledged_turn(world, other_id)
    dead_work = await _unacknowledged_turn(world, "12345")  # a worker nobody runs
    async with here.exclusive_recovery():
        await recover(engine, InMemoryEventBus(), await here.dead_filter())
    assert await _failed(engine, dead_work)
    assert not await _failed(engine, live_work)  # the other worker is still on it

    await _kill(other, other_id, here)
    async with here.exclusive_recovery():
        await recover(engine, InMemoryEventBus(), await here.dead_filter())
    assert await _failed(engine, live_work)
    # A stopped worker's lock is gone (its connection is not handed to the pool still
    # holding it, where the next user would hold the lock instead).
    await here.stop()
    assert worker_id() not in await _observed_live(engine)


async def test_a_worker_whose_lock_connection_is_cut_knows_it_lost_its_lock(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("several workers serve PostgreSQL only")
    here = WorkerPresence(engine)
    await here.start()
    try:
        await here.verify()  # held: nothing to report
        await here.verify()
        await cut_worker_lock_connection(engine, worker_id())
        for _ in range(100):  # the others see it gone at once
            if worker_id() not in await _observed_live(engine):
                break
            await asyncio.sleep(0.05)
        with pytest.raises(PresenceLost):
            await here.verify()
        # And again: a connection SQLAlchemy opens anew in its place holds no lock.
        with pytest.raises(PresenceLost, match=r"no longer held|failed"):
            await here.verify()
    finally:
        await here.stop()


async def _observed_live(engine) -> frozenset[str]:
    observer = WorkerPresence(engine)
    observer._conn = await engine.connect()
    try:
        return await observer.live_workers()
    finally:
        await observer.stop()


async def test_a_sweep_takes_over_the_work_of_a_worker_gone_at_two_looks_in_a_row(
    engine, two_workers: tuple[WorkerPresence, asyncio.subprocess.Process, str]
):
    """A worker that just lost its lock still runs until its heartbeat notices: a sweep
    leaves its work to the next sweep, by when it has stopped."""
    here, other, other_id = two_workers
    world = World(engine)
    work = await _unacknowledged_turn(world, other_id)
    async with here.exclusive_recovery():  # start-up: the other worker lives
        await recover(engine, InMemoryEventBus(), await here.dead_filter())
    await _kill(other, other_id, here)
    await recover(engine, InMemoryEventBus(), await here.sweep_filter())
    assert not await _failed(engine, work)  # gone at one look only
    await recover(engine, InMemoryEventBus(), await here.sweep_filter())
    assert await _failed(engine, work)


async def test_recoveries_run_one_at_a_time(engine):
    if engine.dialect.name != "postgresql":
        pytest.skip("several workers serve PostgreSQL only")
    first, second = WorkerPresence(engine), WorkerPresence(engine)
    await first.start()
    order: list[str] = []
    try:
        async with first.exclusive_recovery():
            # The second worker (a connection of its own) waits for the first to finish.
            second._conn = await engine.connect()

            async def second_recovers() -> None:
                async with second.exclusive_recovery():
                    order.append("second")

            waiting = asyncio.create_task(second_recovers())
            await asyncio.sleep(0.3)
            order.append("first done")
        await asyncio.wait_for(waiting, 10)
        assert order == ["first done", "second"]
    finally:
        await first.stop()
        await second.stop()


async def test_a_second_process_on_one_sqlite_database_is_refused(database_url, engine):
    if engine.dialect.name != "sqlite":
        pytest.skip("the single-process lock is SQLite's")
    other, _ = await _other_process(database_url, "sqlite")
    try:
        with pytest.raises(OtherProcessHoldsDatabase, match="SQLite serves one process"):
            await SingleProcessLock(engine).start()
    finally:
        other.kill()
        await other.wait()
    # Gone with its process: this one may serve it now (and runtimes of one process share it).
    first, second = SingleProcessLock(engine), SingleProcessLock(engine)
    await first.start()
    await second.start()
    await first.stop()
    await second.stop()


def test_a_forked_worker_draws_its_own_identity():
    """A server that forks workers after importing the app gives each its own identity (one
    shared advisory-lock key would make them take each other's waiters for their own)."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_report_worker_id, args=(child,))
    process.start()
    forked = parent.recv()
    process.join(10)
    assert process.exitcode == 0
    assert forked != worker_id()
    assert int(forked) > 0


def _report_worker_id(pipe) -> None:
    pipe.send(worker_id())
