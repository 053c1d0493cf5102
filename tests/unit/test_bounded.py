"""``bounded``: database work the caller's cancellation cannot cut in half."""

from __future__ import annotations

import asyncio

import pytest

from backend.db.bounded import bounded


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def test_a_cancelled_caller_waits_for_the_work_then_sees_its_cancellation():
    release = asyncio.Event()
    finished: list[str] = []

    async def work() -> str:
        await release.wait()
        finished.append("work")
        return "done"

    caller = asyncio.create_task(bounded(work()))
    await _settle()
    caller.cancel()
    await _settle()
    caller.cancel()  # a repeated cancel does not abandon the work either
    await _settle()
    assert not caller.done() and finished == []
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert finished == ["work"]


async def test_an_uncancelled_caller_gets_the_result_or_the_error():
    async def ok() -> int:
        return 7

    async def failing() -> None:
        raise ValueError("no")

    assert await bounded(ok()) == 7
    with pytest.raises(ValueError):
        await bounded(failing())


async def test_work_past_its_bound_is_cancelled():
    cancelled = asyncio.Event()

    async def stuck() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        await bounded(stuck(), seconds=0.01)
    assert cancelled.is_set()


async def test_a_cancelled_caller_has_what_the_work_created_undone():
    """The work succeeded for a caller that is gone: ``undo`` receives its result, runs to
    the end, and only then is the cancellation re-raised."""
    release = asyncio.Event()
    undone: list[str] = []

    async def work() -> str:
        await release.wait()
        return "reservation"

    async def undo(made: str) -> None:
        await asyncio.sleep(0)
        undone.append(made)

    caller = asyncio.create_task(bounded(work(), undo=undo))
    await _settle()
    caller.cancel()
    await _settle()
    assert undone == []
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert undone == ["reservation"]


async def test_undo_is_not_called_when_the_work_failed_or_the_caller_stayed():
    undone: list[object] = []

    async def undo(made: object) -> None:
        undone.append(made)

    async def ok() -> int:
        return 1

    assert await bounded(ok(), undo=undo) == 1
    release = asyncio.Event()

    async def failing() -> None:
        await release.wait()
        raise ValueError("no")

    caller = asyncio.create_task(bounded(failing(), undo=undo))
    await _settle()
    caller.cancel()
    await _settle()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert undone == []
