"""The summary projector: events name tasks; the repository rule decides their summaries."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, update

from backend import failpoints
from backend.db.engine import read_tx, write_tx
from backend.db.json import json_merge
from backend.db.tables import messages
from backend.events import Event, InMemoryEventBus
from backend.projections.summaries import SummaryRepairError, TaskSummaries, summaries
from backend.projections.summary_projector import SummaryProjector
from backend.request_evidence import pending_id
from backend.vocabulary import RequestStatus, SessionState
from tests.support.builders import World
from tests.support.processes import eventually


def projector(engine) -> SummaryProjector:
    bus = InMemoryEventBus()
    return SummaryProjector(engine, bus, TaskSummaries(engine, bus))


async def summary_of(engine, task: str) -> dict | None:
    async with read_tx(engine) as conn:
        row = (await conn.execute(select(summaries).where(summaries.c.task_id == task))).first()
    return dict(row._mapping) if row else None


def message_event(task: str, session: str, status: str, type_: str = "updated") -> Event:
    """An event payload as a client would see it; the projector must not believe it."""
    return Event(
        f"session.message.{type_}",
        {
            "task_id": task,
            "session_id": session,
            "message": {"metadata": {"status": status}},
            "pending_action": "clarification" if status == "pending" else None,
        },
    )


async def two_request_identities(engine) -> tuple[str, str, str, str]:
    """A task whose secondary session owns a pending bundle while the primary session's
    bundle was answered."""
    world = World(engine)
    task = await world.task()
    answered = await world.session(task, state=SessionState.IDLE, is_primary=True)
    turn = await world.turn(answered, started=1)
    await world.question(answered, turn, status=RequestStatus.ANSWERED.value)
    asking = await world.session(
        task, state=SessionState.WAITING_FOR_INPUT, is_primary=False, created=2
    )
    turn = await world.turn(asking, started=3)
    bundle = await world.question(asking, turn)
    return task, answered, asking, bundle


@pytest.mark.scenario("S45")
@pytest.mark.parametrize("order", ["terminal_last", "pending_last"])
async def test_close_events_of_two_identities_leave_the_repository_truth(engine, order):
    task, answered, asking, _ = await two_request_identities(engine)
    events = [
        message_event(task, asking, "pending", "added"),
        message_event(task, answered, "answered"),
    ]
    if order == "pending_last":
        events.reverse()
    await projector(engine).apply(events)
    summary = await summary_of(engine, task)
    assert summary is not None
    assert summary["pending_action"] == "clarification"
    assert summary["primary_session_id"] == answered
    assert summary["session_state"] == "IDLE"


@pytest.mark.scenario("S45")
async def test_a_late_pending_event_cannot_resurrect_an_answered_bundle(engine):
    task, _answered, asking, bundle = await two_request_identities(engine)
    await projector(engine).apply([message_event(task, asking, "pending", "added")])
    first = await summary_of(engine, task)
    async with write_tx(engine) as conn:  # the bundle is answered in the repository
        await conn.execute(
            update(messages)
            .where(pending_id(messages) == bundle)
            .values(metadata=json_merge(messages.c.metadata, {"status": "answered"}))
        )
    # The delayed "pending" event arrives after the answer: the repository wins.
    await projector(engine).apply([message_event(task, asking, "pending", "added")])
    summary = await summary_of(engine, task)
    assert first is not None and summary is not None
    assert summary["pending_action"] is None
    assert summary["revision"] == first["revision"] + 1


async def test_refresh_without_change_keeps_the_revision(engine):
    task, _answered, asking, _ = await two_request_identities(engine)
    p = projector(engine)
    await p.apply([message_event(task, asking, "pending")])
    first = await summary_of(engine, task)
    await p.apply([message_event(task, asking, "pending")])
    assert await summary_of(engine, task) == first


async def test_events_naming_only_a_session_are_resolved_to_its_task(engine):
    task, _answered, asking, _ = await two_request_identities(engine)
    await projector(engine).apply([Event("session.updated", {"session_id": asking})])
    summary = await summary_of(engine, task)
    assert summary is not None and summary["pending_action"] == "clarification"


async def test_unrelated_events_and_deleted_tasks_are_ignored(engine):
    task, *_ = await two_request_identities(engine)
    p = projector(engine)
    await p.apply([Event("task.status_summary.updated", {"task_id": task})])
    assert await summary_of(engine, task) is None
    assert await p.summaries.refresh(["no-such-task"]) == {}


async def test_the_running_projector_follows_the_bus(engine):
    task, _answered, asking, _ = await two_request_identities(engine)
    p = projector(engine)
    await p.start()
    try:
        await p.bus.publish(message_event(task, asking, "pending", "added"))
        summary = await eventually(lambda: summary_of(engine, task), lambda s: s is not None)
        assert summary["pending_action"] == "clarification"
    finally:
        await p.stop()


@pytest.mark.fault("summary.cas", "hold", "stopping the projector waits for the refresh")
async def test_stopping_lets_the_refresh_in_flight_finish_and_frees_the_write_lock(engine):
    # Cancelling a refresh mid-transaction once left SQLite's write lock held and the projector
    # task running: stop() must wait for the refresh instead of cutting it in half.
    task, _answered, asking, _ = await two_request_identities(engine)
    p = projector(engine)
    await p.start()
    failpoints.configure("summary.cas", "hold", count=1)
    try:
        await p.bus.publish(message_event(task, asking, "pending", "added"))
        await eventually(lambda: failpoints.listing()["summary.cas"]["waiting"] == 1)
        stopping = asyncio.create_task(p.stop())
        for _ in range(20):  # give a cancel every chance to land
            await asyncio.sleep(0)
        assert not stopping.done()
        failpoints.clear("summary.cas")
        await asyncio.wait_for(stopping, 10)
    finally:
        failpoints.clear_all()
        await p.stop()
    summary = await summary_of(engine, task)
    assert summary is not None and summary["pending_action"] == "clarification"
    async with write_tx(engine) as conn:  # nobody holds the write lock
        await conn.execute(
            update(summaries)
            .where(summaries.c.task_id == task)
            .values(revision=summaries.c.revision)
        )


async def test_refresh_that_cannot_converge_raises(engine, monkeypatch):
    task, *_ = await two_request_identities(engine)
    summaries_ = TaskSummaries(engine, InMemoryEventBus())

    async def lose_every_race(todo, stored):  # another writer always wins
        return []

    monkeypatch.setattr(summaries_, "_write", lose_every_race)
    with pytest.raises(SummaryRepairError):
        await summaries_.refresh([task])
