"""Start-up recovery of crash leftovers (built directly in the database, as a crash leaves them)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from backend.authority import BundleState, bundle_facts, classify_bundle, current_turn_ids
from backend.authority.bundles import NoLiveWaiters
from backend.db.engine import read_tx
from backend.db.tables import messages, sessions, turns
from backend.events import Event, InMemoryEventBus
from backend.orchestrator.reservations import reservation_metadata
from backend.recovery import START_EVENT_PENDING, RecoveryError, recover
from backend.vocabulary import MessageType, SessionState
from tests.support.builders import World

CLAIM = {
    "status": "answered",
    "answer": {"option_ids": ["o1"], "option_labels": ["yes"], "text": ""},
}


class RecordingBus(InMemoryEventBus):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.published: list[Event] = []

    async def publish(self, event: Event) -> None:
        if self.fail:
            raise RuntimeError("bus down")
        self.published.append(event)


async def crashed_mid_resume(
    engine, attempted: Any = None, evidence: bool = False, claimed_ids: Any = None
) -> dict[str, str]:
    """A detached answer claimed and reserved, with a pre-existing terminal sibling."""
    world = World(engine)
    session = await world.session(state=SessionState.RUNNING)
    asking = await world.turn(session, started=1)
    pid = await world.question(session, asking, status="rejected")  # terminal before the claim
    claimed = await world.message(
        session,
        asking,
        type_=MessageType.CLARIFICATION_REQUEST,
        meta={"pending_id": pid, **CLAIM, "delivery_intent": "I1", "delivery_path": "detached"},
    )
    meta = reservation_metadata(asking, pid, claimed_ids if claimed_ids is not None else [claimed])
    if attempted is not None:
        meta["prompt_dispatch_attempted"] = attempted
    successor = await world.turn(session, started=2, meta=meta)
    if evidence:
        await world.message(session, successor)
    return {
        "session": session,
        "asking": asking,
        "pid": pid,
        "claimed": claimed,
        "successor": successor,
    }


async def rows(engine, pid: str) -> dict[str, dict]:
    async with read_tx(engine) as conn:
        result = await conn.execute(select(messages.c.id, messages.c.metadata))
        return {r.id: r.metadata for r in result if r.metadata.get("pending_id") == pid}


async def successor_metadata(conn, turn_id: str) -> dict:
    return (await conn.execute(select(turns.c.metadata).where(turns.c.id == turn_id))).scalar()


async def state_of(engine, pid: str) -> BundleState:
    async with read_tx(engine) as conn:
        facts = await bundle_facts(conn, pid)
    return classify_bundle(facts, NoLiveWaiters())


async def turn_ids(engine, session: str) -> list[str]:
    async with read_tx(engine) as conn:
        return [
            r.id
            for r in await conn.execute(select(turns.c.id).where(turns.c.session_id == session))
        ]


@pytest.mark.scenario("S19")
async def test_unattempted_reservation_is_deleted_and_exactly_the_claimed_rows_restored(engine):
    crash = await crashed_mid_resume(engine)
    await recover(engine, RecordingBus())

    assert crash["successor"] not in await turn_ids(engine, crash["session"])
    after = await rows(engine, crash["pid"])
    claimed = after[crash["claimed"]]
    assert claimed["status"] == "pending"
    assert not {"answer", "delivery_intent", "delivery_path"} & claimed.keys()
    sibling = next(m for mid, m in after.items() if mid != crash["claimed"])
    assert sibling["status"] == "rejected"  # pre-existing terminal sibling unchanged
    assert await state_of(engine, crash["pid"]) is BundleState.ACTIVE_DETACHED
    async with read_tx(engine) as conn:
        state = (
            await conn.execute(select(sessions.c.state).where(sessions.c.id == crash["session"]))
        ).scalar()
    assert state == SessionState.WAITING_FOR_INPUT.value


@pytest.mark.scenario("S20")
@pytest.mark.scenario("S30")
@pytest.mark.parametrize("attempted", [True, "true", "1", 1], ids=repr)
async def test_attempted_reservation_is_kept_current_and_the_answer_stays_terminal(
    engine, attempted
):
    crash = await crashed_mid_resume(engine, attempted=attempted)
    bus = RecordingBus()
    await recover(engine, bus)

    async with read_tx(engine) as conn:
        current = (await current_turn_ids(conn, [crash["session"]]))[crash["session"]]
        meta = (
            await conn.execute(select(turns.c.metadata).where(turns.c.id == crash["successor"]))
        ).scalar()
    assert current == crash["successor"]
    assert not any(key.startswith("prompt_dispatch") for key in meta)
    assert START_EVENT_PENDING not in meta  # replayed and cleared
    claimed = (await rows(engine, crash["pid"]))[crash["claimed"]]
    assert claimed["status"] == "answered" and "delivery_intent" not in claimed
    assert await state_of(engine, crash["pid"]) is BundleState.TERMINAL


async def test_message_evidence_also_preserves_the_successor(engine):
    crash = await crashed_mid_resume(engine, evidence=True)
    await recover(engine, RecordingBus())
    assert crash["successor"] in await turn_ids(engine, crash["session"])
    assert (await rows(engine, crash["pid"]))[crash["claimed"]]["status"] == "answered"


@pytest.mark.scenario("S36")
async def test_start_event_replay_is_retried_until_the_bus_accepts(engine):
    crash = await crashed_mid_resume(engine, attempted=True)
    with pytest.raises(RuntimeError, match="bus down"):
        await recover(engine, RecordingBus(fail=True))
    async with read_tx(engine) as conn:
        meta = (
            await conn.execute(select(turns.c.metadata).where(turns.c.id == crash["successor"]))
        ).scalar()
    assert meta[START_EVENT_PENDING] is True  # the marker survives a failed replay

    bus = RecordingBus()
    await recover(engine, bus)
    started = [e for e in bus.published if e.type == "turn.started"]
    assert [(e.data["session_id"], e.data["turn_id"]) for e in started] == [
        (crash["session"], crash["successor"])
    ]
    assert all("prompt_dispatch" not in str(e.data) for e in bus.published)
    bus_again = RecordingBus()
    await recover(engine, bus_again)
    assert bus_again.published == []  # cleared after acceptance: no second replay


@pytest.mark.scenario("S37")
@pytest.mark.parametrize("bad_ids", [[""], [42], [None], "m1", {}], ids=repr)
async def test_malformed_claimed_ids_fail_recovery_and_change_nothing(engine, bad_ids):
    crash = await crashed_mid_resume(engine, claimed_ids=bad_ids)
    before = await rows(engine, crash["pid"])
    with pytest.raises(RecoveryError):
        await recover(engine, RecordingBus())
    assert crash["successor"] in await turn_ids(engine, crash["session"])
    assert await rows(engine, crash["pid"]) == before


@pytest.mark.scenario("S21")
async def test_unhanded_claim_is_restored_to_pending(engine):
    world = World(engine)
    session = await world.session(state=SessionState.WAITING_FOR_INPUT)
    turn = await world.turn(session, started=1)
    pid = await world.question(
        session, turn, status="answered", delivery_intent="I9", delivery_path="live"
    )
    await recover(engine, RecordingBus())
    (row,) = (await rows(engine, pid)).values()
    assert row["status"] == "pending" and "delivery_intent" not in row
    assert await state_of(engine, pid) is BundleState.ACTIVE_DETACHED


@pytest.mark.parametrize("newer", ["turn", "terminal"])
async def test_stale_claim_is_retired_without_reactivating_history(engine, newer):
    world = World(engine)
    state = SessionState.COMPLETED if newer == "terminal" else SessionState.IDLE
    session = await world.session(state=state)
    turn = await world.turn(session, started=1)
    pid = await world.question(
        session, turn, status="answered", delivery_intent="I7", delivery_path="live"
    )
    if newer == "turn":
        await world.turn(session, started=2)
    await recover(engine, RecordingBus())
    (row,) = (await rows(engine, pid)).values()
    assert row["status"] == "answered" and "delivery_intent" not in row
    assert await state_of(engine, pid) is BundleState.TERMINAL
