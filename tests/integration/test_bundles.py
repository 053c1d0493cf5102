"""Bundle identity and the five bundle states, read through the repository rule."""

from __future__ import annotations

import pytest

from backend.authority import (
    BundleState,
    active_bundles,
    bundle_facts,
    classify_bundle,
    session_authority,
    visible_turns,
)
from backend.authority.bundles import NoLiveWaiters
from backend.db.engine import read_tx
from backend.db.tables import sessions
from backend.models import MessageType, PendingAction, SessionState
from tests.support.builders import MISSING, World


class Waiters:
    def __init__(self, *pending_ids: str) -> None:
        self.pending_ids = set(pending_ids)

    def has_waiter(self, pending_id: str) -> bool:
        return pending_id in self.pending_ids


async def state_of(engine, pending_id: str, waiters=None) -> BundleState:
    async with read_tx(engine) as conn:
        facts = await bundle_facts(conn, pending_id)
    assert facts is not None
    return classify_bundle(facts, waiters or NoLiveWaiters())


async def pending_action(engine, session_id: str) -> PendingAction | None:
    async with read_tx(engine) as conn:
        (authority,) = await session_authority(conn, sessions.c.id == session_id)
    return authority.pending_action


async def active_ids(engine, session_id: str) -> list[str]:
    async with read_tx(engine) as conn:
        return [b.pending_id for b in await active_bundles(conn, session_id)]


async def test_current_turn_question_without_waiter_is_active_detached(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, agent_disconnected=True)
    assert await state_of(engine, pid) is BundleState.ACTIVE_DETACHED
    assert await pending_action(engine, session) is PendingAction.CLARIFICATION
    assert await active_ids(engine, session) == [pid]


async def test_current_turn_question_with_waiter_is_active_live(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn)
    assert await state_of(engine, pid, Waiters(pid)) is BundleState.ACTIVE_LIVE


@pytest.mark.scenario("S02")
async def test_newer_turn_supersedes_older_pending_question_without_rewriting_it(engine):
    world = World(engine)
    session = await world.session()
    old = await world.turn(session, started=1)
    pid = await world.question(session, old, agent_disconnected=True)
    await world.turn(session, started=2)

    assert await state_of(engine, pid, Waiters(pid)) is BundleState.SUPERSEDED_HISTORY
    assert await pending_action(engine, session) is None
    assert await active_ids(engine, session) == []
    # History is kept as it was: the row still says pending.
    async with read_tx(engine) as conn:
        facts = await bundle_facts(conn, pid)
    assert facts is not None and facts.pending_rows == 1 and facts.turn_id == old


@pytest.mark.scenario("S04")
async def test_hidden_attempted_successor_keeps_visible_predecessor_question_inert(engine):
    world = World(engine)
    session = await world.session()
    visible = await world.turn(session, started=1)
    pid = await world.question(session, visible, agent_disconnected=True)
    await world.turn(
        session, started=2, meta={"prompt_dispatch_pending": "1", "prompt_dispatch_attempted": "1"}
    )

    async with read_tx(engine) as conn:
        assert [t.id for t in await visible_turns(conn, session)] == [visible]
    assert await pending_action(engine, session) is None
    assert await active_ids(engine, session) == []
    assert await state_of(engine, pid) is BundleState.SUPERSEDED_HISTORY


async def test_unattempted_reservation_leaves_predecessor_question_active(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn)
    await world.turn(session, started=2, meta={"prompt_dispatch_pending": True})
    assert await state_of(engine, pid) is BundleState.ACTIVE_DETACHED
    assert await pending_action(engine, session) is PendingAction.CLARIFICATION


async def test_missing_status_is_pending_in_the_current_turn(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, status=MISSING)
    assert await state_of(engine, pid) is BundleState.ACTIVE_DETACHED
    assert await pending_action(engine, session) is PendingAction.CLARIFICATION


async def test_missing_status_in_an_older_turn_is_history(engine):
    world = World(engine)
    session = await world.session()
    old = await world.turn(session, started=1)
    pid = await world.question(session, old, status=MISSING)
    await world.turn(session, started=2)
    assert await state_of(engine, pid) is BundleState.SUPERSEDED_HISTORY
    assert await pending_action(engine, session) is None


@pytest.mark.parametrize("legacy", ["", None], ids=["empty", "null"])
async def test_legacy_empty_turn_ids_do_not_mask_the_bundle_identity(engine, legacy):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, status="answered")
    await world.question(session, legacy, pending_id=pid)  # pending legacy sibling
    async with read_tx(engine) as conn:
        facts = await bundle_facts(conn, pid)
    assert facts is not None and facts.turn_id == turn
    assert await state_of(engine, pid) is BundleState.ACTIVE_DETACHED
    assert await pending_action(engine, session) is PendingAction.CLARIFICATION


async def test_bundle_without_any_turn_id_is_inert(engine):
    world = World(engine)
    session = await world.session()
    await world.turn(session, started=1)
    pid = await world.question(session, "")
    await world.question(session, None, pending_id=pid)
    assert await state_of(engine, pid) is BundleState.SUPERSEDED_HISTORY
    assert await pending_action(engine, session) is None


@pytest.mark.parametrize(
    ("current_id", "other_id"), [("turn-a", "turn-z"), ("turn-z", "turn-a")], ids=["lt", "gt"]
)
async def test_conflicting_turn_ids_make_the_bundle_inert(engine, current_id, other_id):
    world = World(engine)
    session = await world.session()
    other = await world.turn(session, started=1, turn_id=other_id)
    current = await world.turn(session, started=2, turn_id=current_id)
    pid = await world.question(session, current)
    await world.question(session, other, pending_id=pid)
    async with read_tx(engine) as conn:
        facts = await bundle_facts(conn, pid)
    assert facts is not None and facts.turn_id is None
    assert await state_of(engine, pid) is BundleState.SUPERSEDED_HISTORY
    assert await pending_action(engine, session) is None
    assert await active_ids(engine, session) == []


async def test_partially_terminal_bundle_stays_answerable_for_pending_siblings(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, status="answered")
    await world.question(session, turn, pending_id=pid)
    assert await state_of(engine, pid) is BundleState.ACTIVE_DETACHED


@pytest.mark.parametrize("status", ["answered", "rejected", "cancelled", "expired"])
async def test_bundle_with_no_pending_row_is_terminal(engine, status):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, status=status)
    await world.question(session, turn, pending_id=pid, status=status)
    assert await state_of(engine, pid) is BundleState.TERMINAL
    assert await pending_action(engine, session) is None


@pytest.mark.parametrize(
    "state", [SessionState.COMPLETED, SessionState.FAILED, SessionState.CANCELLED]
)
async def test_pending_rows_of_a_terminal_session_are_terminal(engine, state):
    world = World(engine)
    session = await world.session(state=state)
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn)
    assert await state_of(engine, pid, Waiters(pid)) is BundleState.TERMINAL
    assert await active_ids(engine, session) == []


async def test_delivery_intent_marks_the_bundle_claimed(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, status="answered", delivery_intent={"id": "intent-1"})
    assert await state_of(engine, pid, Waiters(pid)) is BundleState.DELIVERY_CLAIMED
    assert await pending_action(engine, session) is None


async def test_delivery_intent_beside_a_pending_row_still_claims_the_bundle(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, status="answered", delivery_intent={"id": "i"})
    await world.question(session, turn, pending_id=pid)
    assert await state_of(engine, pid, Waiters(pid)) is BundleState.DELIVERY_CLAIMED
    assert await pending_action(engine, session) is None
    assert await active_ids(engine, session) == []


async def test_delivery_claim_outranks_supersession(engine):
    world = World(engine)
    session = await world.session()
    old = await world.turn(session, started=1)
    pid = await world.question(session, old, status="answered", delivery_intent={"id": "i"})
    await world.turn(session, started=2)
    assert await state_of(engine, pid) is BundleState.DELIVERY_CLAIMED


async def test_resolving_one_bundle_leaves_its_neighbour_active(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    done = await world.question(session, turn, status="rejected")
    open_ = await world.question(session, turn)
    assert await state_of(engine, done) is BundleState.TERMINAL
    assert await state_of(engine, open_) is BundleState.ACTIVE_DETACHED
    assert await active_ids(engine, session) == [open_]


async def test_clarification_outranks_permission(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    await world.question(session, turn, type_=MessageType.PERMISSION_REQUEST)
    assert await pending_action(engine, session) is PendingAction.PERMISSION
    await world.question(session, turn)
    assert await pending_action(engine, session) is PendingAction.CLARIFICATION


async def test_unknown_pending_id_has_no_facts(engine):
    async with read_tx(engine) as conn:
        assert await bundle_facts(conn, "no-such-bundle") is None


async def test_bundle_rows_are_found_across_sessions_by_pending_id_only_in_their_session(engine):
    world = World(engine)
    first = await world.session()
    second = await world.session()
    turn_a = await world.turn(first, started=1)
    turn_b = await world.turn(second, started=1)
    pid_a = await world.question(first, turn_a)
    await world.question(second, turn_b, status="answered")
    assert await active_ids(engine, first) == [pid_a]
    assert await active_ids(engine, second) == []
