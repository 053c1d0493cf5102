"""Fault points the browser lifecycle tests (``tests/e2e/test_lifecycle.py``) hold to order
races: each stops exactly where its name says, and releasing it lets the work finish."""

from __future__ import annotations

import asyncio
import json

import pytest

from backend import failpoints
from backend.projections.revision import ProjectionRevision
from tests.api.test_events import clarification_added, next_frame
from tests.support.http import agent_replies, bundles, idle, session_of, start_session
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


def revision(data: dict) -> ProjectionRevision:
    return ProjectionRevision.from_json(data["pending_action_revision"])


async def clean_session(live) -> tuple[str, str]:
    task, session = await start_session(live, "/reply hello")
    await idle(live, task, session)
    return task, session


async def ask_until(live, session: str, point: str, question: str) -> None:
    """Prompt the agent to ask ``question`` (and wait for it), until the store reaches the
    armed fault point ``point``."""
    await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt",
        json={"content": f"/ask {question}\n/wait 600"},
    )
    await eventually(lambda: failpoint_hits(point), lambda n: n >= 1)


@pytest.mark.scenario("S06")
async def test_a_list_held_after_its_read_is_older_and_staler_than_the_overtaking_event(live):
    """``sessions.list.after_read``: the list has already read the clean session when a
    question event overtakes it, so its content *and* revision are older than the event's."""
    task, session = await clean_session(live)
    async with live.websocket() as ws:
        failpoints.configure("sessions.list.after_read", "hold", count=1)
        try:
            listing = asyncio.create_task(live.http.get(f"/api/v1/tasks/{task}/task-sessions"))
            await eventually(lambda: failpoint_hits("sessions.list.after_read"), lambda n: n >= 1)
            await live.http.post(
                f"/api/v1/task-sessions/{session}/prompt",
                json={"content": "/ask Overtake? | yes\n/disconnect"},
            )
            event = (await next_frame(ws, clarification_added(session)))["data"]
        finally:
            failpoints.clear("sessions.list.after_read")
        response = await listing
    (stale,) = response.json()["sessions"]
    assert stale["pending_action"] is None and event["pending_action"] == "clarification"
    assert revision(stale) < revision(event)  # so a client keeps the event's projection
    # Only the first read was held: later lists pass and are newer than the event.
    fresh = await session_of(live, task, session)
    assert fresh["pending_action"] == "clarification" and revision(fresh) > revision(event)


async def test_a_held_question_is_not_stored_until_released(live):
    """``clarification.before_store``: the agent's question waits before anything is stored."""
    task, session = await clean_session(live)
    failpoints.configure("clarification.before_store", "hold")
    try:
        async with live.websocket() as ws:
            await live.http.post(
                f"/api/v1/task-sessions/{session}/prompt",
                json={"content": "/ask Held at the door? | yes | no\n/disconnect"},
            )
            await eventually(lambda: failpoint_hits("clarification.before_store"), lambda n: n >= 1)
            assert await bundles(live, session) == []
            assert (await session_of(live, task, session))["pending_action"] is None
            failpoints.clear("clarification.before_store")
            event = (await next_frame(ws, clarification_added(session)))["data"]
    finally:
        failpoints.clear("clarification.before_store")
    assert event["pending_action"] == "clarification"
    (bundle,) = await bundles(live, session)
    assert [q["question"] for q in bundle["questions"]] == ["Held at the door?"]


async def test_a_held_bundle_read_answers_after_release(live):
    """``clarifications.list``: an active-bundle read (the UI's pending discovery) waits."""
    _task, session = await clean_session(live)
    failpoints.configure("clarifications.list", "hold")
    try:
        read = asyncio.create_task(live.http.get(f"/api/v1/task-sessions/{session}/clarifications"))
        await eventually(lambda: failpoint_hits("clarifications.list"), lambda n: n >= 1)
        assert not read.done()
    finally:
        failpoints.clear("clarifications.list")
    response = await read
    assert response.status_code == 200
    assert json.loads(response.text) == {"bundles": []}


@pytest.mark.scenario("S01")
@pytest.mark.fault(
    "clarification.after_store", "hold", "answer delivered live to the wait, no resume"
)
async def test_a_question_is_live_from_the_moment_it_is_stored(live):
    """``clarification.after_store``: committed and not yet announced, the question already
    has its waiter, so an answer then reaches the agent's wait; before, the row was visible
    without its waiter and the answer took the detached path (a new prompt to a busy agent)."""
    _task, session = await clean_session(live)
    failpoints.configure("clarification.after_store", "hold")
    try:
        await ask_until(live, session, "clarification.after_store", "Stored yet? | yes | no")
        (bundle,) = await bundles(live, session)
        assert bundle["state"] == "active_live"
        answer = [
            {"message_id": q["message_id"], "option_ids": [q["options"][0]["id"]]}
            for q in bundle["questions"]
        ]
        responding = asyncio.create_task(
            live.http.post(
                f"/api/v1/clarification/{bundle['pending_id']}/respond", json={"answers": answer}
            )
        )
        await asyncio.sleep(0.2)  # the waiter holds the answer until the ask goes on
        assert not responding.done()
        failpoints.clear("clarification.after_store")
        response = await responding
    finally:
        failpoints.clear("clarification.after_store")
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "delivered"
    await eventually(
        lambda: agent_replies(live, session), lambda r: r[-1:] == ["Got: Stored yet?: yes"]
    )
    assert len(await live.dispatched(session)) == 2  # "hello", the question: no resume


@pytest.mark.fault(
    "clarification.after_store", "error", "no waiter left; detached, answered by one resume"
)
async def test_a_question_abandoned_right_after_its_store_stays_detached(live):
    """A fault right after the store's commit (its outcome unknown to the asker): the
    question stays, detached, with no waiter left behind, and is answered as a detached one
    once the agent's turn ended."""
    task, session = await clean_session(live)
    failpoints.configure("clarification.after_store", "error", count=1)
    try:
        await ask_until(live, session, "clarification.after_store", "Left behind? | yes | no")
        (bundle,) = await eventually(
            lambda: bundles(live, session),
            lambda b: len(b) == 1 and b[0]["state"] == "active_detached",
            within_s=20,
        )
    finally:
        failpoints.clear("clarification.after_store")
    assert not live.runtime.waiters.has_waiter(bundle["pending_id"])
    await idle(live, task, session, state="WAITING_FOR_INPUT")  # its turn ended
    answer = [
        {"message_id": q["message_id"], "option_ids": [q["options"][0]["id"]]}
        for q in bundle["questions"]
    ]
    response = await live.http.post(
        f"/api/v1/clarification/{bundle['pending_id']}/respond", json={"answers": answer}
    )
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "resumed"
    await eventually(
        lambda: agent_replies(live, session), lambda r: r[-1:] == ["Got: Left behind?: yes"]
    )


@pytest.mark.scenario("S32")
async def test_an_agent_gone_while_its_question_is_announced_leaves_it_detached(live):
    """The agent is killed while its stored question is being announced: the waiter goes
    and the question is detached and answerable, its turn paused, as after any disconnect."""
    task, session = await clean_session(live)
    failpoints.configure("clarification.before_store", "hold")
    try:
        await ask_until(live, session, "clarification.before_store", "Announced? | yes | no")
        failpoints.configure("events.message", "hold", count=1)  # the question's announce
        failpoints.clear("clarification.before_store")
        await eventually(lambda: failpoint_hits("events.message"), lambda n: n >= 1)
        agent = live.executor.process_of(session)
        assert agent is not None
        agent.kill()  # the tool call's connection drops: its request is cancelled
        (bundle,) = await eventually(
            lambda: bundles(live, session),
            lambda b: len(b) == 1 and b[0]["state"] == "active_detached",
            within_s=20,
        )
    finally:
        failpoints.clear("events.message")
        failpoints.clear("clarification.before_store")
    assert not live.runtime.waiters.has_waiter(bundle["pending_id"])
    listed = await idle(live, task, session, state="WAITING_FOR_INPUT")  # its turn paused
    assert listed["pending_action"] == "clarification"
