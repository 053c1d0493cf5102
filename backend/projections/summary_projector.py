"""The task-summary projector: source events trigger refreshes; the repository decides.

An event only names a task whose summary may have changed. The projector never reads pending
state from the payload: it re-derives the whole summary through the one repository rule, so
events that arrive close together or out of order (a terminal event after a newer pending one)
still leave the summary matching the database (S45). Events that arrive while a refresh runs
are coalesced into the next one. With several workers each projector handles its own
worker's events (``local_only``): every source event is heard by exactly one projector. A
projector that fell so far behind that its queue overflowed refreshes every task.

Stopping never cuts a refresh in half: it runs under :func:`backend.db.bounded.bounded`, so
``stop()`` waits for the refresh in flight (cancelling one mid-transaction on SQLite could leave
the write lock held and would turn the cancel into an error the loop swallows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.bounded import bounded
from backend.db.engine import read_tx
from backend.db.tables import sessions, tasks
from backend.events import Event, EventBus
from backend.events.bus import OVERFLOW
from backend.projections.summaries import TaskSummaries

log = logging.getLogger(__name__)

#: Event types whose source change can move a task summary.
SOURCE_EVENTS = frozenset(
    {
        "session.message.added",
        "session.message.updated",
        "session.message.deleted",
        "session.updated",
        "turn.started",
        "turn.completed",
        "task.updated",
    }
)


class SummaryProjector:
    def __init__(self, engine: AsyncEngine, bus: EventBus, summaries: TaskSummaries) -> None:
        self.engine = engine
        self.bus = bus
        self.summaries = summaries
        self._task: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()

    async def start(self) -> None:
        """Subscribe before returning, so no event published afterwards is missed."""
        self._task = asyncio.create_task(self._run(), name="summary-projector")
        await self._subscribed.wait()

    async def stop(self) -> None:
        """Stop listening; a refresh in flight finishes first (see the module docstring)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        async with self.bus.subscribe(local_only=True) as queue:
            self._subscribed.set()
            while True:
                batch = [await queue.get()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                await bounded(self.apply(batch))

    async def apply(self, events: list[Event]) -> None:
        """Refresh the summaries of every task ``events`` name. Failures are logged: the next
        read repairs the summary (reads never trust the cache)."""
        try:
            task_ids = await self._tasks_named(events)
            if task_ids:
                await self.summaries.refresh(task_ids)
        except Exception as error:
            log.warning("summary projector: refresh failed: %r", error)

    async def _tasks_named(self, events: list[Event]) -> set[str]:
        task_ids: set[str] = set()
        session_ids: set[str] = set()
        if any(event.type == OVERFLOW for event in events):
            log.warning("summary projector fell behind; refreshing every task")
            async with read_tx(self.engine) as conn:
                return set((await conn.execute(select(tasks.c.id))).scalars())
        for event in events:
            if event.type not in SOURCE_EVENTS:
                continue
            if event.data.get("task_id"):
                task_ids.add(str(event.data["task_id"]))
            elif event.data.get("session_id"):
                session_ids.add(str(event.data["session_id"]))
        if session_ids:
            async with read_tx(self.engine) as conn:
                rows = await conn.execute(
                    select(sessions.c.task_id).where(sessions.c.id.in_(session_ids))
                )
                task_ids.update(r.task_id for r in rows)
        return task_ids
