"""Which worker owns a piece of unfinished durable work, and whether that worker still lives.

Every durable operation that start-up recovery may have to finish is stamped with its worker
(:data:`WORKER_KEY` in the row's metadata: a successor reservation, an ordinary turn waiting for
its acknowledgement, a response's delivery intent, a permission request). With one process per
database every such leftover at start-up is a crash's, as before. With several workers on
PostgreSQL a starting worker must not touch what a live worker is doing (a resume in flight,
a claim being delivered):

- each worker holds a session-level advisory lock (``pg_advisory_lock(NAMESPACE, key)``) on a
  connection of its own for its whole life, so the database itself says who lives: a worker
  killed with ``kill -9`` loses its connection and its lock at once, no lease to wait out;
- recovery runs under the advisory lock ``(NAMESPACE, 0)``, so two workers starting together
  recover one after the other, and touches only work whose owner holds no lock
  (:meth:`WorkerPresence.dead_filter`);
- a worker that dies while others serve leaves its work to them: every live worker sweeps
  every ``KANDEV_WORKER_SWEEP_S`` (the same recovery, same filter, under the same lock when it
  is free), so a resume, a claim or a permission request of the dead worker is settled
  within seconds, not at the next start;
- a worker whose lock connection is lost (the database restarted, the connection was cut or
  terminated) has lost its lock with it, and the others take it for dead: it stops at once
  (fail-stop, :class:`PresenceLost`; its supervisor starts a new worker with a new identity,
  and its agents die with it), rather than serve on as a zombie beside the workers taking its
  work over. It checks its lock every ``KANDEV_WORKER_HEARTBEAT_S``; a sweep takes over only
  the work of workers it saw gone twice, a sweep interval apart
  (:meth:`WorkerPresence.sweep_filter`), so a worker that lost its lock has stopped before the
  others touch its work (the atomic claims keep even a later zombie from answering twice);
- a clarification bundle names the worker whose waiter holds it; while that worker lives,
  every worker treats the bundle as live (:func:`other_live_workers`) and hands answers to it
  (``backend/clarifications/handover.py``); once it died the bundle is detached by the rule.

SQLite serves one process: a second process on the same file would recover the first one's
live work. :class:`SingleProcessLock` refuses it at start-up with a message saying so (an
exclusive ``flock`` on ``<database>.lock``, held for the process's life; runtimes in one process
share it, as tests that restart a runtime in-process do).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import secrets
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import ColumnElement, or_, text, true
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend.db.json import json_text

#: The metadata key naming the worker that owns unfinished work (a turn, a request's waiter).
WORKER_KEY = "worker"
#: The metadata key naming the worker delivering a response (beside its delivery intent).
INTENT_WORKER_KEY = "intent_worker"


def _draw_worker_id() -> str:
    return str(secrets.randbelow(2**31 - 2) + 1)


_worker_id = _draw_worker_id()


def _redraw_in_child() -> None:
    global _worker_id
    _worker_id = _draw_worker_id()


# A server that forks its workers after importing the app (granian, gunicorn) must not give
# them one identity: they would share one advisory lock key, and each would take the other's
# waiters and leftovers for its own.
os.register_at_fork(after_in_child=_redraw_in_child)


def worker_id() -> str:
    """This process's worker: a positive 31-bit number (the advisory lock's key), as text;
    drawn at import and again in every forked child."""
    return _worker_id


#: The advisory-lock class of Kandev's locks (an arbitrary constant: "KDV").
NAMESPACE = 0x4B4456
RECOVERY_KEY = 0


def owner_stamp(key: str = WORKER_KEY) -> dict[str, str]:
    """What a durable operation adds to its metadata to name its worker."""
    return {key: worker_id()}


class OtherProcessHoldsDatabase(RuntimeError):
    """Another process serves this SQLite database."""


class PresenceLost(RuntimeError):
    """This worker no longer holds its advisory lock: the others may take its work over."""


class WorkerPresence:
    """This worker's advisory lock on PostgreSQL, and the question who else lives."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._conn: AsyncConnection | None = None
        #: The workers alive at the previous sweep's look (``None`` before the first sweep).
        self._seen_alive: frozenset[str] | None = None

    async def start(self) -> None:
        self._conn = await self.engine.connect()
        # Named, so an operator can tell the presence sessions in pg_stat_activity.
        await self._conn.execute(
            text("SELECT set_config('application_name', :name, false)"),
            {"name": f"kandev worker {worker_id()}"},
        )
        await self._conn.execute(
            text("SELECT pg_advisory_lock(:ns, :key)"), {"ns": NAMESPACE, "key": int(worker_id())}
        )
        await self._conn.commit()

    async def verify(self) -> None:
        """Raise :class:`PresenceLost` unless this worker's lock is still held by its own
        connection (a broken connection counts: its session, and the lock, are gone)."""
        if self._conn is None:
            raise PresenceLost("this worker's lock connection is closed")
        try:
            held = (
                await self._conn.execute(
                    _HOLDS_OWN_LOCK, {"ns": NAMESPACE, "key": int(worker_id())}
                )
            ).scalar_one()
            await self._conn.commit()
        except SQLAlchemyError as error:  # the connection is gone, or was replaced
            raise PresenceLost(f"this worker's lock connection failed: {error!r}") from error
        if not held:
            raise PresenceLost("this worker's advisory lock is no longer held")

    async def stop(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            # Discarded, not returned to the pool: the database session ends, and its locks
            # with it (a pooled connection would keep holding them for its next user).
            await conn.invalidate()
            await conn.close()

    @asynccontextmanager
    async def exclusive_recovery(self) -> AsyncIterator[None]:
        """One worker recovers at a time."""
        assert self._conn is not None
        lock = {"ns": NAMESPACE, "key": RECOVERY_KEY}
        await self._conn.execute(text("SELECT pg_advisory_lock(:ns, :key)"), lock)
        await self._conn.commit()
        try:
            yield
        finally:
            await self._conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), lock)
            await self._conn.commit()

    @asynccontextmanager
    async def recovery_if_free(self) -> AsyncIterator[bool]:
        """The recovery lock if no worker holds it now (a sweep: when another worker recovers
        or sweeps, this one skips its turn instead of queueing behind it)."""
        assert self._conn is not None
        lock = {"ns": NAMESPACE, "key": RECOVERY_KEY}
        taken = bool(
            (
                await self._conn.execute(text("SELECT pg_try_advisory_lock(:ns, :key)"), lock)
            ).scalar_one()
        )
        await self._conn.commit()
        try:
            yield taken
        finally:
            if taken:
                await self._conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), lock)
                await self._conn.commit()

    async def reset(self) -> None:
        """After a failed statement on the lock connection: roll it back so the next use works
        (its session, and the worker lock with it, stays)."""
        if self._conn is not None:
            await self._conn.rollback()

    async def live_workers(self) -> frozenset[str]:
        """Every worker holding its lock now (this one included)."""
        assert self._conn is not None
        alive = await live_workers(self._conn)
        await self._conn.commit()
        return alive

    async def dead_filter(self) -> DeadOwners:
        """The work start-up recovery may take over: that of every worker not alive now (its
        look is the first sweep's previous one)."""
        self._seen_alive = await self.live_workers()
        return DeadOwners(self._seen_alive)

    async def sweep_filter(self) -> DeadOwners:
        """The work a sweep may take over: that of workers gone now and at the previous sweep.
        A worker that just lost its lock is still running until its heartbeat notices (within
        ``KANDEV_WORKER_HEARTBEAT_S``, well below a sweep interval); its work waits for the
        next sweep, by when it has stopped."""
        alive = await self.live_workers()
        seen, self._seen_alive = self._seen_alive, alive
        return DeadOwners(alive | (seen or frozenset()))


async def live_workers(conn: AsyncConnection) -> frozenset[str]:
    """The workers holding their advisory lock now, read in ``conn``'s transaction (none on
    SQLite, whose one process judges its own waiters by its registry)."""
    if conn.dialect.name != "postgresql":
        return frozenset()
    rows = await conn.execute(_LIVE_WORKERS, {"ns": NAMESPACE})
    return frozenset(str(key) for key in rows.scalars() if key != RECOVERY_KEY)


_HOLDS_OWN_LOCK = text(
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND pid = pg_backend_pid() AND classid::bigint = :ns AND objid::bigint = :key"
    " AND objsubid = 2)"
)

_LIVE_WORKERS = text(
    "SELECT objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted"
    " AND classid::bigint = :ns AND objsubid = 2"
)


async def other_live_workers(conn: AsyncConnection, owners: Iterable[str | None]) -> frozenset[str]:
    """Which of ``owners`` (the workers named by waiting bundles) are other workers that live
    now: their waiters hold those bundles. This worker's own are judged by its registry (a
    stamp outlives the wait it names), and only a foreign name costs a query."""
    foreign = {owner for owner in owners if owner is not None and owner != worker_id()}
    if not foreign:
        return frozenset()
    return foreign & await live_workers(conn)


class DeadOwners:
    """A filter for work whose owner is gone (or unnamed: stamped before owners existed)."""

    def __init__(self, alive: frozenset[str] | None) -> None:
        #: ``None``: one process per database, every owner of a leftover is gone.
        self.alive = alive

    def where(self, metadata: Any, key: str = WORKER_KEY) -> ColumnElement[bool]:
        if not self.alive:
            return true()
        owner = json_text(metadata, key)
        return or_(owner.is_(None), owner.not_in(sorted(self.alive)))


#: One process per database: every leftover is a crash's.
EVERY_OWNER_DEAD = DeadOwners(None)


class SingleProcessLock:
    """The process-wide exclusive lock on a SQLite database's lock file."""

    #: Lock file path -> (descriptor, runtimes of this process holding it).
    _held: ClassVar[dict[str, tuple[int, int]]] = {}

    def __init__(self, engine: AsyncEngine) -> None:
        database = engine.url.database
        self.path = None if not database or database == ":memory:" else f"{database}.lock"

    async def start(self) -> None:
        if self.path is not None:
            await asyncio.to_thread(self._acquire, self.path)

    async def stop(self) -> None:
        if self.path is not None:
            self._release(self.path)

    @classmethod
    def _acquire(cls, path: str) -> None:
        held = cls._held.get(path)
        if held is not None:
            cls._held[path] = (held[0], held[1] + 1)
            return
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OtherProcessHoldsDatabase(
                f"another Kandev process serves the SQLite database {path[: -len('.lock')]}; "
                "SQLite serves one process (use PostgreSQL and KANDEV_NATS_URL for several "
                "workers)"
            ) from None
        cls._held[path] = (fd, 1)

    @classmethod
    def _release(cls, path: str) -> None:
        held = cls._held.get(path)
        if held is None:
            return
        fd, count = held
        if count > 1:
            cls._held[path] = (fd, count - 1)
            return
        del cls._held[path]
        os.close(fd)  # the lock goes with the descriptor
