"""Start-up replay reaches its consumers and tells the truth (issue #16, item 7)."""

from __future__ import annotations

from sqlalchemy import update

from backend.config import Settings
from backend.db.engine import write_tx
from backend.db.tables import turns
from backend.orchestrator.dispatch import PromptDispatcher
from backend.orchestrator.reservations import COMPLETION_STATUS, START_EVENT_PENDING
from backend.recovery import recover
from backend.runtime import Runtime
from backend.vocabulary import SessionState
from tests.integration.test_recovery import RecordingBus
from tests.integration.test_summary_projector import summary_of
from tests.support.builders import World, at
from tests.support.processes import eventually


class NoAgent(PromptDispatcher):
    async def dispatch_prompt(self, prompt) -> None:
        raise AssertionError("start-up must not dispatch anything")


async def replayable_turn(engine, status: str | None) -> tuple[str, str, str]:
    """A finished turn whose start event is still in the outbox, and a pending question."""
    world = World(engine)
    task = await world.task()
    session = await world.session(task, state=SessionState.WAITING_FOR_INPUT)
    meta: dict = {START_EVENT_PENDING: True}
    if status is not None:
        meta[COMPLETION_STATUS] = status
    turn = await world.turn(session, started=1, meta=meta)
    await world.question(session, turn)
    async with write_tx(engine) as conn:
        await conn.execute(update(turns).where(turns.c.id == turn).values(completed_at=at(2)))
    return task, session, turn


async def test_replayed_turn_completed_carries_the_status_the_turn_ended_with(engine):
    _, _, failed = await replayable_turn(engine, "failed")
    _, _, legacy = await replayable_turn(engine, None)  # ended before the status was kept
    bus = RecordingBus()
    await recover(engine, bus)
    completed = {
        e.data["turn_id"]: e.data["status"] for e in bus.published if e.type == "turn.completed"
    }
    assert completed == {failed: "failed", legacy: "completed"}
    assert [e.type for e in bus.published] == ["turn.started", "turn.completed"] * 2


async def test_the_summary_projector_hears_the_start_up_replay(engine):
    """The projector subscribes before recovery, so the replayed events repair the task's
    summary without waiting for any client read."""
    task, _, _ = await replayable_turn(engine, "paused")
    runtime = Runtime(engine, Settings(test_api=True), dispatcher=NoAgent())
    await runtime.start()
    try:
        summary = await eventually(lambda: summary_of(engine, task), lambda s: s is not None)
        assert summary["pending_action"] == "clarification"
    finally:
        await runtime.stop()


async def test_a_turn_whose_prompt_was_never_acknowledged_is_failed_at_start_up(engine):
    """The process stopped between admitting an ordinary turn and the agent's acknowledgement:
    nothing would ever finish that turn, so start-up fails it and frees the session (found by
    the model test: the session stayed RUNNING and refused every prompt)."""
    from sqlalchemy import select

    from backend.db.engine import read_tx
    from backend.db.tables import sessions
    from backend.orchestrator.admission import DISPATCH_UNACKNOWLEDGED

    world = World(engine)
    session = await world.session(state=SessionState.RUNNING)
    acknowledged = await world.turn(session, started=1)
    async with write_tx(engine) as conn:
        await conn.execute(
            update(turns).where(turns.c.id == acknowledged).values(completed_at=at(2))
        )
    lost = await world.turn(session, started=3, meta={DISPATCH_UNACKNOWLEDGED: True})
    bus = RecordingBus()
    await recover(engine, bus)
    async with read_tx(engine) as conn:
        state = (
            await conn.execute(select(sessions.c.state).where(sessions.c.id == session))
        ).scalar()
        row = (await conn.execute(select(turns).where(turns.c.id == lost))).one()
    assert state == "IDLE"
    assert row.completed_at is not None and DISPATCH_UNACKNOWLEDGED not in row.metadata
    assert [(e.type, e.data.get("status")) for e in bus.published] == [
        ("turn.started", None),
        ("turn.completed", "failed"),
    ]
