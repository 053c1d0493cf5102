"""The event bus interface and its in-memory implementation.

Events announce committed changes; they are never a second source of truth (consumers re-read
through :mod:`backend.authority`). The interface is small so a networked bus (NATS, PostgreSQL
LISTEN/NOTIFY) can replace the in-memory one when several workers share a database.
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


class EventBus(Protocol):
    async def publish(self, event: Event) -> None:
        """Accept the event for delivery; raising means it was not accepted."""
        ...

    def subscribe(self) -> Any:
        """An async context manager yielding an ``asyncio.Queue[Event]``."""
        ...


class InMemoryEventBus:
    """Fan-out to every subscriber of this process; slow subscribers lose nothing (unbounded)."""

    def __init__(self) -> None:
        self._subscribers: set[asyncio.Queue[Event]] = set()

    async def publish(self, event: Event) -> None:
        for queue in tuple(self._subscribers):
            queue.put_nowait(event)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue[Event]]:
        queue: asyncio.Queue[Event] = asyncio.Queue()
        self._subscribers.add(queue)
        try:
            yield queue
        finally:
            self._subscribers.discard(queue)
