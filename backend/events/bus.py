"""The event bus interface and its in-memory implementation.

Events announce committed changes; they are never a second source of truth (consumers re-read
through :mod:`backend.authority`). One process uses the in-memory bus; several workers on one
database use the NATS bus (``nats_bus.py``), which fans out to the same local subscribers.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "data": self.data}


#: How many events a subscriber may have waiting. A subscriber that falls further behind
#: (a client that stopped reading) loses what was queued and finds :data:`OVERFLOW` instead:
#: memory per subscriber stays bounded, and the subscriber resynchronises from a snapshot.
QUEUE_LIMIT = 1000
#: The event a subscriber finds where its dropped events were.
OVERFLOW = "bus.overflow"


class EventBus(Protocol):
    async def publish(self, event: Event) -> None:
        """Accept the event for delivery; raising means it was not accepted."""
        ...

    def subscribe(self, *, local_only: bool = False) -> Any:
        """An async context manager yielding an ``asyncio.Queue[Event]`` (bounded: see
        :data:`OVERFLOW`). ``local_only``: only this process's own events (for consumers
        whose work every process does for its own events, like the summary projector)."""
        ...


class Subscription(asyncio.Queue[Event]):
    """A subscriber's queue, and whether it hears only this process's events."""

    def __init__(self, limit: int, *, local_only: bool) -> None:
        # One slot above the limit, for the overflow marker.
        super().__init__(limit + 1)
        self.local_only = local_only


class InMemoryEventBus:
    """Fan-out to every subscriber of this process, each with a bounded queue."""

    def __init__(self, queue_limit: int = QUEUE_LIMIT) -> None:
        self.queue_limit = queue_limit
        self._subscribers: set[Subscription] = set()

    async def publish(self, event: Event) -> None:
        self.deliver(event)

    def deliver(self, event: Event, *, from_here: bool = True) -> None:
        """Put ``event`` in every subscriber's queue (not those subscribed ``local_only``
        when the event came from another process)."""
        for queue in tuple(self._subscribers):
            if from_here or not queue.local_only:
                offer(queue, event, self.queue_limit)

    @asynccontextmanager
    async def subscribe(self, *, local_only: bool = False) -> AsyncIterator[Subscription]:
        queue = Subscription(self.queue_limit, local_only=local_only)
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)


def offer(queue: asyncio.Queue[Event], event: Event, limit: int) -> None:
    """Queue ``event``; a queue already holding ``limit`` events is emptied and gets the
    overflow marker first (once: later events queue behind it as usual)."""
    if queue.qsize() >= limit:
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait(Event(OVERFLOW, {"dropped": limit}))
    queue.put_nowait(event)
