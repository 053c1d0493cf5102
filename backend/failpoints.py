"""Named fault points at the durable boundaries the spec talks about (tests only).

Off unless configured: ``KANDEV_FAILPOINTS="name=action[:arg];..."`` at start-up, or the test
API when ``KANDEV_TEST_API=1``. Actions: ``error`` (raise), ``delay:MS``, ``hold`` (wait until
released), ``crash`` (kill the process at once, as a power cut would). ``hit`` costs one dict
lookup when nothing is configured.
"""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass, field


class FailpointError(RuntimeError):
    """Raised by an ``error`` fault point."""


@dataclass
class Failpoint:
    action: str
    ms: int = 0
    count: int | None = None
    released: asyncio.Event = field(default_factory=asyncio.Event)
    hits: int = 0
    #: Hits currently held by a ``hold`` (a cancelled waiter no longer counts).
    waiting: int = 0


_points: dict[str, Failpoint] = {}


def configure(name: str, action: str, ms: int = 0, count: int | None = None) -> None:
    if action not in ("error", "delay", "hold", "crash"):
        raise ValueError(f"unknown fault action {action!r}")
    _points[name] = Failpoint(action, ms, count)


def clear(name: str) -> None:
    point = _points.pop(name, None)
    if point is not None:
        point.released.set()


def clear_all() -> None:
    for name in list(_points):
        clear(name)


def listing() -> dict[str, dict[str, object]]:
    return {
        name: {
            "action": p.action,
            "ms": p.ms,
            "count": p.count,
            "hits": p.hits,
            "waiting": p.waiting,
        }
        for name, p in _points.items()
    }


def load_from_env(value: str | None = None) -> None:
    """Parse ``name=action[:arg];...`` (arg = ms for delay, count otherwise)."""
    spec = os.environ.get("KANDEV_FAILPOINTS", "") if value is None else value
    for item in filter(None, (part.strip() for part in spec.split(";"))):
        name, _, rest = item.partition("=")
        action, _, arg = rest.partition(":")
        if action == "delay":
            configure(name, action, ms=int(arg or 0))
        else:
            configure(name, action, count=int(arg) if arg else None)


async def hit(name: str) -> None:
    point = _points.get(name)
    if point is None or (point.count is not None and point.count <= 0):
        return  # off, or used up (kept until cleared so a pending hold can be released)
    point.hits += 1
    if point.count is not None:
        point.count -= 1
    if point.action == "error":
        raise FailpointError(f"fault point {name}")
    if point.action == "delay":
        await asyncio.sleep(point.ms / 1000)
    elif point.action == "hold":
        point.waiting += 1
        try:
            await point.released.wait()
        finally:
            point.waiting -= 1
    elif point.action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
