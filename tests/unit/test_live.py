"""``state.live``: aborting superseded activation loads, and bounding live-update watchers."""

from __future__ import annotations

import asyncio

import pytest

from state.live import InflightLoads, Watchers, next_batch


async def test_aborted_load_returns_cancelled_error_as_its_outcome() -> None:
    loads = InflightLoads()
    started = asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.sleep(30)
        return "late"

    run = asyncio.ensure_future(loads.run("tab", 1, slow()))
    await started.wait()
    assert loads.abort("tab", [1, 2]) == 1
    result = await run
    assert isinstance(result, asyncio.CancelledError)  # an outcome (AbortError), not a crash
    assert len(loads) == 0


async def test_failed_load_returns_its_exception_and_success_its_value() -> None:
    loads = InflightLoads()

    async def boom() -> None:
        raise ValueError("projection failed")

    async def fine() -> int:
        return 7

    assert isinstance(await loads.run("tab", 1, boom()), ValueError)
    assert await loads.run("tab", 2, fine()) == 7


async def test_cancelling_the_caller_propagates_instead_of_becoming_an_outcome() -> None:
    loads = InflightLoads()
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await asyncio.sleep(30)

    caller = asyncio.ensure_future(loads.run("tab", 1, slow()))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller


async def test_abort_only_touches_the_same_tab() -> None:
    loads = InflightLoads()
    started = asyncio.Event()

    async def slow() -> str:
        started.set()
        await asyncio.sleep(0.05)
        return "done"

    run = asyncio.ensure_future(loads.run("tab-a", 1, slow()))
    await started.wait()
    assert loads.abort("tab-b", [1]) == 0
    assert await run == "done"


def test_one_watcher_per_tab_and_a_newer_one_replaces_the_older() -> None:
    watchers = Watchers(limit=2, grace_s=10)
    first = watchers.claim("tab")
    second = watchers.claim("tab")
    assert first is not None and second is not None
    assert not watchers.keep_going(first, lambda _: True)
    assert watchers.keep_going(second, lambda _: True)
    watchers.release(first)  # releasing a replaced handle leaves the current one
    assert watchers.running("tab")


def test_watchers_are_bounded() -> None:
    watchers = Watchers(limit=1)
    assert watchers.claim("a") is not None
    assert watchers.claim("b") is None
    assert watchers.claim("a") is not None  # the same tab may still restart its watcher


def test_a_gone_tab_stops_its_watcher_after_the_grace_period() -> None:
    watchers = Watchers(grace_s=10)
    handle = watchers.claim("tab")
    assert handle is not None
    assert watchers.keep_going(handle, lambda _: True, now=100.0)
    assert watchers.keep_going(handle, lambda _: False, now=105.0)  # a reconnect may follow
    assert not watchers.keep_going(handle, lambda _: False, now=111.0)
    watchers.release(handle)
    assert len(watchers) == 0


async def test_next_batch_drains_what_is_queued_or_times_out() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    assert await next_batch(queue, 0.01) == []
    for n in range(5):
        queue.put_nowait(n)
    assert await next_batch(queue, 1, limit=3) == [0, 1, 2]
    assert await next_batch(queue, 1) == [3, 4]


async def test_a_finished_watcher_does_not_count_as_running_and_shutdown_cancels_the_rest() -> None:
    watchers = Watchers()
    done = watchers.claim("done-tab")
    live = watchers.claim("live-tab")
    assert done is not None and live is not None

    async def finish() -> None:
        return None

    done.task = asyncio.ensure_future(finish())
    await done.task
    live.task = asyncio.ensure_future(asyncio.sleep(30))
    assert not watchers.running("done-tab")  # a crashed or ended watcher may be restarted
    assert watchers.running("live-tab")
    await watchers.stop_all()
    assert live.task.cancelled() and len(watchers) == 0
