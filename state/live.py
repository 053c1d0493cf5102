"""Per-client asyncio bookkeeping that cannot live in Reflex state (tasks are not data).

- :class:`InflightLoads` — the session load of each activation in flight, keyed by client
  token and ticket generation, so a newer activation can abort the loads it supersedes (the
  JavaScript ``AbortError`` of the spec becomes ``asyncio.CancelledError``, S42).
- :class:`Watchers` — at most one live-update watcher per client token, each bounded: it ends
  when its tab has been gone for a grace period, or when a newer watcher replaces it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


class InflightLoads:
    def __init__(self) -> None:
        self._tasks: dict[tuple[str, int], asyncio.Task[Any]] = {}

    async def run(self, token: str, generation: int, work: Awaitable[T]) -> T | BaseException:
        """Run ``work`` as a cancellable load; its result, or the exception that ended it.

        ``asyncio.CancelledError`` is *returned* when the load itself was aborted (by
        :meth:`abort`), and re-raised when the caller is being cancelled: only the former is an
        activation outcome.
        """
        task = asyncio.ensure_future(work)
        key = (token, generation)
        self._tasks[key] = task
        try:
            return await task
        except asyncio.CancelledError as error:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            return error
        except Exception as error:
            return error
        finally:
            if self._tasks.get(key) is task:
                del self._tasks[key]

    def abort(self, token: str, generations: Iterable[int]) -> int:
        """Cancel the loads of these generations (superseded activations); returns how many
        were still running."""
        cancelled = 0
        for generation in generations:
            task = self._tasks.get((token, generation))
            if task is not None and not task.done():
                task.cancel()
                cancelled += 1
        return cancelled

    def __len__(self) -> int:
        return len(self._tasks)


@dataclass
class WatchHandle:
    token: str
    serial: int
    #: Monotonic time the tab was last seen connected.
    seen_at: float = field(default_factory=time.monotonic)
    #: The watcher's task (kept here so it is not garbage-collected, and for shutdown).
    task: asyncio.Task[Any] | None = None


class Watchers:
    """One watcher per client token; ``limit`` bounds how many run at all."""

    def __init__(self, limit: int = 512, grace_s: float = 30.0) -> None:
        self.limit = limit
        self.grace_s = grace_s
        self._serial = 0
        self._handles: dict[str, WatchHandle] = {}

    def claim(self, token: str) -> WatchHandle | None:
        """Start watching for ``token``: a newer watcher replaces an older one for the same
        tab (the older one ends at its next check). ``None`` when the limit is reached."""
        if token not in self._handles and len(self._handles) >= self.limit:
            return None
        self._serial += 1
        handle = WatchHandle(token, self._serial)
        self._handles[token] = handle
        return handle

    def running(self, token: str) -> bool:
        handle = self._handles.get(token)
        return handle is not None and (handle.task is None or not handle.task.done())

    def keep_going(
        self, handle: WatchHandle, connected: Callable[[str], bool], now: float | None = None
    ) -> bool:
        """Whether ``handle`` should keep watching: it is still the tab's current watcher,
        and the tab is connected or was within the grace period (a reconnect)."""
        if self._handles.get(handle.token) is not handle:
            return False
        now = time.monotonic() if now is None else now
        if connected(handle.token):
            handle.seen_at = now
            return True
        return now - handle.seen_at <= self.grace_s

    def release(self, handle: WatchHandle) -> None:
        if self._handles.get(handle.token) is handle:
            del self._handles[handle.token]

    async def stop_all(self) -> None:
        """Cancel every watcher (app shutdown) and wait for them to end."""
        tasks = [h.task for h in self._handles.values() if h.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._handles.clear()

    def __len__(self) -> int:
        return len(self._handles)


#: Process-wide registries (one Reflex backend worker per process).
INFLIGHT = InflightLoads()
WATCHERS = Watchers()


async def next_batch(queue: asyncio.Queue[T], timeout_s: float, limit: int = 200) -> list[T]:
    """Wait up to ``timeout_s`` for one item, then take whatever else is already queued (up to
    ``limit``), so a burst of events costs one round of reads; ``[]`` on timeout."""
    try:
        first = await asyncio.wait_for(queue.get(), timeout_s)
    except TimeoutError:
        return []
    items = [first]
    while len(items) < limit:
        try:
            items.append(queue.get_nowait())
        except asyncio.QueueEmpty:
            break
    return items
