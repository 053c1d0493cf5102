"""The in-memory bus: every subscriber's queue is bounded; one that falls too far behind loses
what was queued and finds the overflow marker, then hears what comes next."""

from __future__ import annotations

from backend.events.bus import OVERFLOW, Event, InMemoryEventBus
from state.ui_models import OVERFLOW_EVENT, EventPlan


def drain(queue) -> list[Event]:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


async def test_a_subscriber_that_falls_behind_gets_the_marker_and_then_newer_events() -> None:
    bus = InMemoryEventBus(queue_limit=3)
    async with bus.subscribe() as slow, bus.subscribe() as fast:
        for i in range(3):
            await bus.publish(Event("e", {"i": i}))
        assert [e.data["i"] for e in drain(fast)] == [0, 1, 2]
        for i in range(3, 6):
            await bus.publish(Event("e", {"i": i}))
        assert slow.qsize() <= 4  # bounded, whatever it missed
        seen = drain(slow)
        assert seen[0].type == OVERFLOW  # it knows it missed events: resynchronise
        assert [e.data["i"] for e in seen[1:]] == [5]  # then the newest, in order
        assert [e.data["i"] for e in drain(fast)] == [3, 4, 5]  # the others lose nothing


async def test_local_only_subscribers_hear_only_this_process() -> None:
    bus = InMemoryEventBus()
    async with bus.subscribe(local_only=True) as projector, bus.subscribe() as socket:
        bus.deliver(Event("here"))
        bus.deliver(Event("elsewhere"), from_here=False)
        assert [e.type for e in drain(projector)] == ["here"]
        assert [e.type for e in drain(socket)] == ["here", "elsewhere"]


def test_the_ui_resynchronises_everything_after_an_overflow() -> None:
    assert OVERFLOW_EVENT == OVERFLOW
    plan = EventPlan.resync({"t1", "t2"})
    assert plan.reload_tasks == {"t1", "t2"} == plan.stale_session_lists
    assert plan.reload_sessions and plan.discover_bundles and plan.reload_messages
