"""Races between answers, detachment and newer turns: the database decides, once."""

from __future__ import annotations

import asyncio

from backend import failpoints
from backend.vocabulary import MessageType, SessionState
from tests.support.builders import World
from tests.support.http import (
    agent_replies,
    answer_all,
    bundles,
    detach_events,
    idle,
    messages,
    respond,
    session_of,
    start_session,
    turns,
)
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


def question_rows(rows: list[dict]) -> list[dict]:
    return [m for m in rows if m["type"] == MessageType.CLARIFICATION_REQUEST.value]


async def test_detach_racing_an_answer_never_overwrites_the_claimed_answer(live):
    task, session = await start_session(live, "/ask Who wins? | answer\n/wait 2")
    (bundle,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    assert bundle["state"] == "active_live"
    failpoints.configure("respond.after_claim", "hold")
    failpoints.configure("clarification.before_pause", "delay", ms=0)  # counts the detach pass
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("respond.after_claim"), lambda n: n >= 1)

    # The claim is committed; now the agent's wait ends and the detach pass runs.
    await eventually(
        lambda: failpoint_hits("clarification.before_pause"), lambda n: n >= 1, within_s=10
    )
    failpoints.clear("respond.after_claim")

    status, body = await responding
    assert (status, body["outcome"]) == (200, "resumed")  # detached delivery of the claim
    await idle(live, task, session)
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "answered"
    assert not row["metadata"].get("agent_disconnected")  # the detach changed nothing
    assert detach_events(live, session) == []
    assert await agent_replies(live, session) == ["Got: Who wins?: answer"]


async def test_newer_turn_racing_a_detach_leaves_the_old_question_untouched(live):
    task, session = await start_session(live, "/ask Racing? | yes\n/wait 1")
    failpoints.configure("clarification.before_detach", "hold")
    await eventually(lambda: failpoint_hits("clarification.before_detach"), lambda n: n >= 1)

    newer = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "something newer"}
    )
    assert newer.status_code == 202
    failpoints.clear("clarification.before_detach")
    await idle(live, task, session)

    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "pending"  # superseded history, never rewritten
    assert not row["metadata"].get("agent_disconnected")
    assert detach_events(live, session) == []
    assert await bundles(live, session) == []
    assert len(await turns(live, session)) == 2


async def test_resolving_one_bundle_leaves_its_neighbour_answerable(live):
    world = World(live.runtime.engine)
    session = await world.session(state=SessionState.WAITING_FOR_INPUT)
    turn = await world.turn(session, started=1)
    first = await world.question(session, turn, agent_disconnected=True)
    second = await world.question(session, turn, agent_disconnected=True)

    assert (await respond(live, first, {"rejected": True}))[0] == 200
    remaining = await bundles(live, session)
    assert [b["pending_id"] for b in remaining] == [second]
    assert (await session_of(live, world.last_task_id, session))[
        "pending_action"
    ] == "clarification"


async def test_partially_terminal_bundle_takes_an_answer_for_its_pending_sibling(live):
    world = World(live.runtime.engine)
    session = await world.session(state=SessionState.WAITING_FOR_INPUT)
    turn = await world.turn(session, started=1)
    pid = await world.question(session, turn, status="answered", question="Done already?")
    await world.question(
        session,
        turn,
        pending_id=pid,
        question="Still open?",
        options=[{"id": "o1", "label": "yes"}],
        agent_disconnected=True,
    )
    (bundle,) = await bundles(live, session)
    assert [q["question"] for q in bundle["questions"]] == ["Still open?"]

    status, body = await respond(live, pid, answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    statuses = sorted(m["metadata"]["status"] for m in question_rows(await messages(live, session)))
    assert statuses == ["answered", "answered"]
    await eventually(lambda: agent_replies(live, session), lambda r: r == ["Got: Still open?: yes"])
