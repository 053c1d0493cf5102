"""Database work that the caller's cancellation cannot cut in half.

Two reasons to finish a unit of database work even when the task that started it is cancelled:

- The spec's "fresh bounded context": a dropped HTTP request must not abandon a detach or an
  expiry half-way.
- Cancelling a task while its statement runs on aiosqlite is not a clean abort. SQLAlchemy
  treats the ``CancelledError`` as an exit exception and invalidates the connection while the
  driver thread may still hold SQLite's write lock, and the transaction's exit then raises
  ``PendingRollbackError`` in place of the ``CancelledError``, so an ``except Exception`` above
  it swallows the cancel. Seen in practice: a stopping projector that never stopped, and the
  next writer failing with "database is locked".

So the work runs in its own task, shielded from the caller; the caller still sees its
cancellation, once the work has finished. A stuck database cannot hold the caller forever:
past ``seconds`` the work itself is cancelled (the lesser evil).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

#: How long shielded work may run before it is cancelled after all.
BOUNDED_WRITE_S = 10.0

#: Shielded work in flight in this process (so shutdown can let it finish).
_in_flight: set[asyncio.Future[object]] = set()


async def drain(seconds: float = BOUNDED_WRITE_S) -> None:
    """Wait (up to ``seconds``) until no shielded work is in flight, including work that the
    cleanup of finishing work starts meanwhile (a cancelled request detaching its question,
    then pausing its turn). Shutdown calls it before the engine goes away."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    quiet_ticks = 0
    while quiet_ticks < 3 and loop.time() < deadline:
        pending = [task for task in _in_flight if not task.done()]
        if pending:
            quiet_ticks = 0
            await asyncio.wait(pending, timeout=max(deadline - loop.time(), 0))
        else:
            quiet_ticks += 1
            await asyncio.sleep(0.01)


async def bounded(
    work: Awaitable[T],
    seconds: float = BOUNDED_WRITE_S,
    *,
    undo: Callable[[T], Awaitable[object]] | None = None,
    undo_seconds: float | None = None,
) -> T:
    """Run ``work`` to completion even if the caller is cancelled, within ``seconds``.

    A caller cancelled while the work runs waits for the work (every repeated cancel too),
    then re-raises its ``CancelledError``; the work's own outcome is then not reported. When
    the work succeeded and ``undo`` is given, ``undo(result)`` runs first (bounded the same
    way, within ``undo_seconds``, by default ``seconds``): whatever the work created (a
    reservation, a claim, an admitted turn) would otherwise be left with no owner, because the
    caller that would have used it is gone.
    """
    task = asyncio.ensure_future(asyncio.wait_for(work, seconds))
    _in_flight.add(task)
    task.add_done_callback(_in_flight.discard)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(BaseException):  # a repeated cancel, or the work's end
                await asyncio.shield(task)
        succeeded = not task.cancelled() and task.exception() is None  # (retrieves the error)
        if undo is not None and succeeded:
            with contextlib.suppress(BaseException):
                await bounded(undo(task.result()), undo_seconds or seconds)
        raise
