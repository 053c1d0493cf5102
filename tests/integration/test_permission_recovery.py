"""Start-up recovery of permission requests: a crashed backend took its agent processes with it,
so no pending request of a live session's current turn can be answered any more; recovery
cancels exactly those (and announces them), and leaves history and clarifications alone."""

from __future__ import annotations

from sqlalchemy import select

from backend.authority import session_pending_actions
from backend.db.engine import read_tx
from backend.db.tables import messages, sessions
from backend.recovery import recover
from backend.vocabulary import MessageType, SessionState
from tests.integration.test_recovery import RecordingBus
from tests.support.builders import World

PERMISSION = MessageType.PERMISSION_REQUEST


async def statuses(engine) -> dict[str, str | None]:
    async with read_tx(engine) as conn:
        rows = await conn.execute(select(messages.c.metadata))
        return {r.metadata["pending_id"]: r.metadata.get("status") for r in rows}


async def test_recovery_cancels_the_permission_requests_no_agent_can_answer(engine):
    world = World(engine)
    waiting = await world.session(state=SessionState.WAITING_FOR_INPUT)
    old_turn = await world.turn(waiting, started=1)
    superseded = await world.question(waiting, old_turn, type_=PERMISSION)
    current_turn = await world.turn(waiting, started=2)
    abandoned = await world.question(waiting, current_turn, type_=PERMISSION)
    question = await world.question(waiting, current_turn)  # a clarification: detached, kept
    answered = await world.question(waiting, current_turn, type_=PERMISSION, status="answered")
    ended = await world.session(state=SessionState.COMPLETED)
    ended_turn = await world.turn(ended, started=1)
    inert = await world.question(ended, ended_turn, type_=PERMISSION)
    async with read_tx(engine) as conn:
        before = await session_pending_actions(conn, sessions.c.id == waiting)
    assert before[waiting].value == "clarification"

    bus = RecordingBus()
    await recover(engine, bus)

    assert await statuses(engine) == {
        superseded: "pending",  # history: supersession writes nothing
        abandoned: "cancelled",
        question: "pending",
        answered: "answered",
        inert: "pending",  # inert already: the session is terminal
    }
    (event,) = [e for e in bus.published if e.type == "session.message.updated"]
    assert event.data["session_id"] == waiting
    assert event.data["message"]["metadata"] == {"pending_id": abandoned, "status": "cancelled"}

    await recover(engine, RecordingBus())  # a second start finds nothing left to cancel
    assert (await statuses(engine))[abandoned] == "cancelled"


async def test_a_permission_claim_left_by_a_crash_ends_cancelled(engine):
    """A response had claimed the request (delivery intent) when the backend stopped: the
    intent step releases it, and the agent that would have taken it is gone: cancelled."""
    world = World(engine)
    session = await world.session(state=SessionState.WAITING_FOR_INPUT)
    turn = await world.turn(session, started=1)
    claim = {
        "status": "answered",
        "answer": {"option_ids": ["o1"], "option_labels": ["Allow"], "text": ""},
        "delivery_intent": "I1",
    }
    pid = await world.question(session, turn, type_=PERMISSION, **claim)

    await recover(engine, RecordingBus())

    async with read_tx(engine) as conn:
        (meta,) = (await conn.execute(select(messages.c.metadata))).scalars()
        actions = await session_pending_actions(conn, sessions.c.id == session)
    assert meta == {"pending_id": pid, "status": "cancelled"}
    assert actions == {}
