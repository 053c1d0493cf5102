"""The current-turn rule: newest authoritative durable turn by (started_at, created_at, id)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import delete

from backend.authority import current_turn_ids, session_authority, visible_turns
from backend.db.engine import read_tx, write_tx
from backend.db.tables import messages, sessions
from backend.models import PendingAction, SessionState
from tests.support.builders import World

TRUE_FORMS: list[Any] = [True, "true", "1", 1]
FALSE_FORMS: list[Any] = [False, "false", "0", 0, None]


async def current(engine, session_id: str) -> str | None:
    async with read_tx(engine) as conn:
        return (await current_turn_ids(conn, [session_id]))[session_id]


async def test_session_without_turns_has_no_current_turn(engine):
    world = World(engine)
    session = await world.session()
    assert await current(engine, session) is None


async def test_newest_started_turn_is_current(engine):
    world = World(engine)
    session = await world.session()
    await world.turn(session, started=1)
    newest = await world.turn(session, started=3)
    await world.turn(session, started=2)
    assert await current(engine, session) == newest


async def test_started_at_tie_is_broken_by_created_at(engine):
    world = World(engine)
    session = await world.session()
    later_created = await world.turn(session, started=5, created=9)
    await world.turn(session, started=5, created=6)
    assert await current(engine, session) == later_created


async def test_started_and_created_tie_is_broken_by_greatest_id(engine):
    world = World(engine)
    session = await world.session()
    await world.turn(session, started=5, turn_id="turn-a")
    await world.turn(session, started=5, turn_id="turn-c")
    await world.turn(session, started=5, turn_id="turn-b")
    assert await current(engine, session) == "turn-c"


@pytest.mark.parametrize("flag", TRUE_FORMS, ids=repr)
async def test_unattempted_reservation_is_not_authority(engine, flag):
    world = World(engine)
    session = await world.session()
    published = await world.turn(session, started=1)
    await world.turn(session, started=2, meta={"prompt_dispatch_pending": flag})
    assert await current(engine, session) == published


@pytest.mark.parametrize("flag", FALSE_FORMS, ids=repr)
async def test_pending_flag_false_forms_mean_published(engine, flag):
    world = World(engine)
    session = await world.session()
    await world.turn(session, started=1)
    newer = await world.turn(session, started=2, meta={"prompt_dispatch_pending": flag})
    assert await current(engine, session) == newer


@pytest.mark.parametrize("attempted", TRUE_FORMS, ids=repr)
async def test_attempted_reservation_is_authority_in_every_flag_form(engine, attempted):
    world = World(engine)
    session = await world.session()
    await world.turn(session, started=1)
    reserved = await world.turn(
        session,
        started=2,
        meta={"prompt_dispatch_pending": "true", "prompt_dispatch_attempted": attempted},
    )
    assert await current(engine, session) == reserved


@pytest.mark.parametrize("attempted", FALSE_FORMS, ids=repr)
async def test_attempted_false_forms_leave_reservation_without_authority(engine, attempted):
    world = World(engine)
    session = await world.session()
    published = await world.turn(session, started=1)
    await world.turn(
        session,
        started=2,
        meta={"prompt_dispatch_pending": True, "prompt_dispatch_attempted": attempted},
    )
    assert await current(engine, session) == published


async def test_message_evidence_makes_reservation_authority(engine):
    world = World(engine)
    session = await world.session()
    await world.turn(session, started=1)
    reserved = await world.turn(session, started=2, meta={"prompt_dispatch_pending": 1})
    await world.message(session, reserved)
    assert await current(engine, session) == reserved


@pytest.mark.scenario("S03")
async def test_deleting_every_message_of_newer_turn_keeps_it_current(engine):
    world = World(engine)
    session = await world.session()
    old = await world.turn(session, started=1)
    await world.question(session, old)
    newer = await world.turn(session, started=2)
    first = await world.message(session, newer)
    second = await world.message(session, newer)
    async with write_tx(engine) as conn:
        await conn.execute(delete(messages).where(messages.c.id.in_([first, second])))

    assert await current(engine, session) == newer
    async with read_tx(engine) as conn:
        (authority,) = await session_authority(conn, sessions.c.id == session)
    assert authority.pending_action is None


async def test_current_turn_ids_batches_many_sessions(engine):
    world = World(engine)
    task = await world.task()
    expected: dict[str, str | None] = {}
    for i in range(5):
        session = await world.session(task)
        expected[session] = await world.turn(session, started=i) if i % 2 else None
    async with read_tx(engine) as conn:
        assert await current_turn_ids(conn, list(expected)) == expected


@pytest.mark.scenario("S27")
async def test_attempted_unpublished_reservation_is_hidden_from_turn_history(engine):
    world = World(engine)
    session = await world.session()
    first = await world.turn(session, started=1)
    reserved = await world.turn(
        session,
        started=2,
        meta={"prompt_dispatch_pending": True, "prompt_dispatch_attempted": True},
    )
    async with read_tx(engine) as conn:
        assert [t.id for t in await visible_turns(conn, session)] == [first]
    # Authority and visibility differ on purpose: the hidden reservation owns the session.
    assert await current(engine, session) == reserved

    await world.message(session, reserved)
    async with read_tx(engine) as conn:
        assert [t.id for t in await visible_turns(conn, session)] == [first, reserved]


async def test_published_reservation_appears_in_turn_history(engine):
    world = World(engine)
    session = await world.session()
    first = await world.turn(session, started=1)
    published = await world.turn(session, started=2, meta={"prompt_dispatch_pending": False})
    async with read_tx(engine) as conn:
        assert [t.id for t in await visible_turns(conn, session)] == [first, published]


async def test_turn_history_is_ascending_by_started_created_id(engine):
    world = World(engine)
    session = await world.session()
    c = await world.turn(session, started=5, created=5, turn_id="c")
    a = await world.turn(session, started=5, created=5, turn_id="a")
    late = await world.turn(session, started=9, created=1, turn_id="late")
    early_created = await world.turn(session, started=5, created=4, turn_id="z")
    async with read_tx(engine) as conn:
        history = [t.id for t in await visible_turns(conn, session)]
    assert history == [early_created, a, c, late]
    # The current turn is the last visible one when nothing is hidden.
    assert await current(engine, session) == history[-1]


async def test_pending_action_of_terminal_session_is_none(engine):
    world = World(engine)
    for state in (SessionState.COMPLETED, SessionState.FAILED, SessionState.CANCELLED):
        session = await world.session(state=state)
        turn = await world.turn(session, started=1)
        await world.question(session, turn)
        async with read_tx(engine) as conn:
            (authority,) = await session_authority(conn, sessions.c.id == session)
        assert authority.current_turn_id == turn
        assert authority.pending_action is None, state


async def test_pending_action_of_live_session_with_current_question(engine):
    world = World(engine)
    session = await world.session()
    turn = await world.turn(session, started=1)
    await world.question(session, turn)
    async with read_tx(engine) as conn:
        (authority,) = await session_authority(conn, sessions.c.id == session)
    assert authority.pending_action is PendingAction.CLARIFICATION
