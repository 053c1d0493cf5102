"""One queue, in this process, for SQLite's write lock.

SQLite lets one writer at a time hold its write lock. A ``BEGIN IMMEDIATE`` that finds it held
does not queue: it sleeps in SQLite's busy handler (steps of 1, 2, 5, 10, 15, 20, 25 ... up to
100 ms) and tries again. Under concurrent load those sleeps, not work, set the pace: the lock
sits free while every contender is asleep, and a writer can lose every retry to newcomers for
hundreds of milliseconds. Queueing this process's writers here first (first come, first
served) hands the lock to the next writer as soon as the previous one commits.

Correctness still comes from SQLite's lock alone: the gate only orders who asks for it. Only
one process serves an SQLite database (``backend/workers.py``: an exclusive ``flock``), so the
gate orders every serving writer; a writer in another process (the CLI, a migration) still
meets the busy handler, as before. A
writer that waited here longer than the busy timeout goes ahead to ``BEGIN IMMEDIATE`` anyway,
so a holder that never lets go produces the same ``database is locked`` error as without the
gate, and a task that opens a write transaction inside its own (a bug) is not made to wait
for itself. PostgreSQL engines have no gate: its row and advisory locks queue their waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

from sqlalchemy.engine import Engine


class WriteGate:
    """A first-come-first-served queue for one SQLite database's writers in this process."""

    def __init__(self, patience_s: float) -> None:
        #: How long a writer queues before it asks SQLite directly (the busy timeout).
        self.patience_s = patience_s
        # One lock per event loop: an asyncio lock belongs to the loop it first waited on,
        # and an engine may outlive a loop (tests, the CLI's short-lived loops).
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._holders: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[object]]
        self._holders = weakref.WeakKeyDictionary()

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Wait for this writer's turn; held until the block (its transaction) ends."""
        loop = asyncio.get_running_loop()
        me = asyncio.current_task()
        if me is not None and self._holders.get(loop) is me:
            yield  # already this task's turn (a nested write): SQLite decides, as without us
            return
        lock = self._locks.get(loop)
        if lock is None:
            lock = self._locks[loop] = asyncio.Lock()
        acquired = False
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.patience_s):
                acquired = await lock.acquire()
        if not acquired:  # waited as long as SQLite would have: let its busy handler decide
            yield
            return
        if me is not None:
            self._holders[loop] = me
        try:
            yield
        finally:
            if me is not None and self._holders.get(loop) is me:
                del self._holders[loop]
            lock.release()


_gates: weakref.WeakKeyDictionary[Engine, WriteGate] = weakref.WeakKeyDictionary()


def install(sync_engine: Engine, patience_s: float) -> None:
    """Give ``sync_engine`` (an SQLite engine) a write gate."""
    _gates[sync_engine] = WriteGate(patience_s)


def gate_of(sync_engine: Engine) -> WriteGate | None:
    """The engine's write gate; ``None`` for PostgreSQL, or an engine made elsewhere."""
    return _gates.get(sync_engine)
