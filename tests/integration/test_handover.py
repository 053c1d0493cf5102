"""The hand-over of a response to another worker's live waiter (``handover.py``), on a real
NATS server: each of its answers, and what the owner's waiter receives."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import nats
import pytest

from backend.clarifications.handover import ABSENT, CONFIRMED, UNCONFIRMED, RemoteWaiters
from backend.clarifications.waiters import LiveWaiter, WaiterOutcome, WaiterRegistry

OWNER = "7"


@pytest.fixture
async def pair(nats_url: str) -> AsyncIterator[tuple[RemoteWaiters, WaiterRegistry]]:
    """A responder's end and the owner's end (worker :data:`OWNER`)."""
    instance = uuid.uuid4().hex
    owner_waiters = WaiterRegistry()
    owner = RemoteWaiters(owner_waiters, "clarification", confirm_wait_s=0.5, worker=OWNER)
    responder = RemoteWaiters(WaiterRegistry(), "clarification", confirm_wait_s=0.5)
    owner_client, responder_client = await nats.connect(nats_url), await nats.connect(nats_url)
    await owner.start(owner_client, instance)
    await responder.start(responder_client, instance)
    try:
        yield responder, owner_waiters
    finally:
        await owner.stop()
        await responder.stop()
        await owner_client.close()
        await responder_client.close()


def outcome() -> WaiterOutcome:
    return WaiterOutcome("answered", ({"message_id": "m1", "text": "yes"},), intent_id="i-1")


async def test_the_owners_waiter_takes_the_answer_and_confirms_it(pair) -> None:
    responder, waiters = pair
    waiter = LiveWaiter("p-1", "s-1", "t-1", 1)
    waiters.register(waiter)

    async def agent() -> WaiterOutcome:
        taken = await waiter.future
        assert taken.confirmation is not None
        taken.confirmation.set_result([{"id": "m1"}])  # the durable confirmation committed
        return taken

    agent_side = asyncio.ensure_future(agent())
    assert await responder.hand_over(OWNER, "p-1", outcome()) == CONFIRMED
    taken = await agent_side
    assert (taken.outcome, taken.answers, taken.intent_id) == (
        "answered",
        ({"message_id": "m1", "text": "yes"},),
        "i-1",
    )


async def test_no_waiter_at_the_owner_is_absent(pair) -> None:
    responder, _ = pair
    assert await responder.hand_over(OWNER, "p-unknown", outcome()) == ABSENT


async def test_an_owner_that_is_gone_is_absent(pair) -> None:
    responder, _ = pair
    assert await responder.hand_over("12345", "p-1", outcome()) == ABSENT  # no subscriber


async def test_a_waiter_that_takes_it_but_never_confirms_is_unconfirmed(pair) -> None:
    responder, waiters = pair
    waiter = LiveWaiter("p-2", "s-1", "t-1", 1)
    waiters.register(waiter)
    assert await responder.hand_over(OWNER, "p-2", outcome()) == UNCONFIRMED
    assert waiter.future.done()  # it was handed over: only the compare-and-set settles it


async def test_a_restored_claim_is_unconfirmed(pair) -> None:
    """The waiter's confirmation found the claim released first (empty rows)."""
    responder, waiters = pair
    waiter = LiveWaiter("p-3", "s-1", "t-1", 1)
    waiters.register(waiter)

    async def agent() -> None:
        taken = await waiter.future
        assert taken.confirmation is not None
        taken.confirmation.set_result([])

    agent_side = asyncio.ensure_future(agent())
    assert await responder.hand_over(OWNER, "p-3", outcome()) == UNCONFIRMED
    await agent_side


async def test_a_hand_over_before_start_is_absent() -> None:
    idle = RemoteWaiters(WaiterRegistry(), "clarification", confirm_wait_s=0.5)
    assert await idle.hand_over(OWNER, "p-1", outcome()) == ABSENT


async def test_a_failing_hand_over_counts_as_unconfirmed(pair, monkeypatch) -> None:
    """Whatever goes wrong after the claim, the responder settles it by compare-and-set."""
    responder, _ = pair

    async def broken(*_args: object) -> str:
        raise RuntimeError("connection reset")

    monkeypatch.setattr(responder, "hand_over", broken)
    assert await responder.deliver(OWNER, "p-1", outcome()) == (UNCONFIRMED, None)
