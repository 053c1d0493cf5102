"""The NATS event bus between workers: every worker's subscribers hear every worker's events,
a worker hears its own exactly once (no echo), the summary projector's local-only queue
hears only its own worker, and databases sharing a NATS server never hear each other."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from backend.events.bus import Event
from backend.events.nats_bus import BusUnavailable, NatsEventBus
from tests.support.processes import free_port


async def heard(queue, within_s: float = 0.5) -> list[Event]:
    """Everything that arrives within ``within_s``."""
    events = []
    deadline = asyncio.get_running_loop().time() + within_s
    while (left := deadline - asyncio.get_running_loop().time()) > 0:
        try:
            events.append(await asyncio.wait_for(queue.get(), left))
        except TimeoutError:
            break
    return events


async def test_workers_hear_each_other_once(nats_url: str) -> None:
    instance = uuid.uuid4().hex
    first, second, stranger = NatsEventBus(nats_url), NatsEventBus(nats_url), NatsEventBus(nats_url)
    await first.start(instance)
    await second.start(instance)
    await stranger.start(uuid.uuid4().hex)  # another database on the same server
    try:
        async with (
            first.subscribe() as first_socket,
            second.subscribe() as second_socket,
            second.subscribe(local_only=True) as second_projector,
            stranger.subscribe() as stranger_socket,
        ):
            await first.publish(Event("session.updated", {"session_id": "s1", "n": 1}))
            await second.publish(Event("turn.started", {"session_id": "s2"}))
            first_heard, second_heard = await heard(first_socket), await heard(second_socket)
            assert sorted(e.type for e in first_heard) == ["session.updated", "turn.started"]
            assert sorted(e.type for e in second_heard) == ["session.updated", "turn.started"]
            remote = next(e for e in second_heard if e.type == "session.updated")
            assert remote.data == {"session_id": "s1", "n": 1}
            assert [e.type for e in await heard(second_projector)] == ["turn.started"]
            assert await heard(stranger_socket) == []
    finally:
        for bus in (first, second, stranger):
            await bus.close()


async def test_no_server_fails_start_up_with_a_message() -> None:
    bus = NatsEventBus(f"nats://127.0.0.1:{free_port()}")
    with pytest.raises(BusUnavailable, match="no NATS server answers"):
        await bus.start("x")
