"""Answering an agent's permission request (``POST /api/v1/permission/{id}/respond``) with the
ACP mock agent as a real process: ``/permit`` sends ``session/request_permission``, the row is
the request, the user's choice reaches the agent exactly once, and every other exit (a newer
turn, a killed agent, a terminal session, no agent at all) leaves a state the spec allows."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import select

from backend import failpoints
from backend.db.engine import read_tx
from backend.db.tables import messages as messages_table
from backend.vocabulary import MessageType, SessionState
from tests.api.test_access import STRANGER, add_user
from tests.support.builders import World
from tests.support.http import (
    agent_replies,
    bundles,
    dump,
    idle,
    messages,
    session_of,
    start_session,
    summary_settled,
)
from tests.support.live import LiveApi, failpoint_hits
from tests.support.processes import eventually

PERMIT = "/reply Checking the build.\n/permit Delete the build directory? | Allow | Reject"


async def respond(
    live: LiveApi, pending_id: str, body: Any, token: str | None = None
) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await live.http.post(
        f"/api/v1/permission/{pending_id}/respond", json=body, headers=headers
    )
    return response.status_code, response.json()


async def permission_rows(live: LiveApi, session_id: str) -> list[dict]:
    return [m for m in await messages(live, session_id) if m["type"] == "permission_request"]


async def asked(live: LiveApi, script: str = PERMIT) -> tuple[str, str, dict]:
    """A session whose agent waits on its permission request."""
    task, session = await start_session(live, script)
    (row,) = await eventually(lambda: permission_rows(live, session), lambda r: len(r) == 1)
    await eventually(
        lambda: live.runtime.permissions.waiters.has_waiter(row["metadata"]["pending_id"])
    )
    await summary_settled(live, task, "permission")  # the projector has caught up
    return task, session, row


def updates_of(live: LiveApi, message_id: str) -> list[dict]:
    """The ``session.message.updated`` events published for one row."""
    return [
        e.data
        for e in live.events_of("session.message.updated")
        if e.data["message"]["id"] == message_id
    ]


async def ended_unanswered(live: LiveApi, row: dict, status: str) -> None:
    """The request ended as ``status`` with exactly one update event, its waiter is gone, and
    a late answer is refused (409 ``terminal``) without another write."""
    pid = row["metadata"]["pending_id"]
    await eventually(
        lambda: status_of(live, row["id"]), lambda m: m["status"] == status, within_s=20
    )
    await eventually(lambda: not live.runtime.permissions.waiters.has_waiter(pid))
    # The row commits before its event is published: wait for the event, then there is one.
    (update,) = await eventually(lambda: updates_of(live, row["id"]))
    assert update["message"]["metadata"]["status"] == status
    answer, body = await respond(live, pid, {"option_id": "o1"})
    assert (answer, body["error"], body["state"]) == (409, "not_active", "terminal")
    assert len(updates_of(live, row["id"])) == 1


async def status_of(live: LiveApi, message_id: str) -> dict:
    async with read_tx(live.runtime.engine) as conn:
        stmt = select(messages_table.c.metadata).where(messages_table.c.id == message_id)
        return (await conn.execute(stmt)).scalar_one()


async def test_an_answered_permission_reaches_the_agent_and_the_turn_goes_on(live):
    task, session, row = await asked(live)
    pid = row["metadata"]["pending_id"]
    meta = row["metadata"]
    assert (row["author"], row["content"], meta["status"]) == (
        "agent",
        "Delete the build directory?",
        "pending",
    )
    assert meta["question"] == "Delete the build directory?"
    assert meta["options"] == [
        {"id": "o1", "label": "Allow", "kind": "allow_once"},
        {"id": "o2", "label": "Reject", "kind": "reject_once"},
    ]
    # What the agent said before asking stays before the request.
    assert await agent_replies(live, session) == ["Checking the build."]
    listed = await session_of(live, task, session)
    assert (listed["pending_action"], listed["state"]) == ("permission", "WAITING_FOR_INPUT")
    await summary_settled(live, task, "permission")
    (bundle,) = await bundles(live, session)
    assert (bundle["pending_id"], bundle["state"]) == (pid, "active_live")
    (added,) = [
        e.data
        for e in live.events_of("session.message.added")
        if e.data["message"]["id"] == row["id"]
    ]
    assert added["pending_action"] == "permission"

    status, body = await respond(live, pid, {"option_id": "o1"})
    assert (status, body) == (200, {"pending_id": pid, "outcome": "delivered"})

    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Checking the build.", "Permission: Allow"]
    answered = await status_of(live, row["id"])
    assert answered["status"] == "answered"
    assert answered["answer"]["option_ids"] == ["o1"]
    assert answered["answer"]["option_labels"] == ["Allow"]
    assert "delivery_intent" not in answered
    assert (await session_of(live, task, session))["pending_action"] is None
    await summary_settled(live, task, None)
    (update,) = updates_of(live, row["id"])
    assert update["message"]["metadata"]["status"] == "answered"
    assert update["pending_action"] is None
    # The request is over: a second answer is refused and writes nothing.
    status, body = await respond(live, pid, {"option_id": "o2"})
    assert (status, body["error"], body["state"]) == (409, "not_active", "terminal")


async def test_a_rejecting_option_reaches_the_agent_as_chosen(live):
    task, session, row = await asked(live, "/permit Push to main? | Allow once | Never")
    pid = row["metadata"]["pending_id"]
    status, _ = await respond(live, pid, {"option_id": "o2"})
    assert status == 200
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Permission: Never"]


async def test_two_concurrent_responds_deliver_exactly_once(live):
    task, session, row = await asked(live)
    pid = row["metadata"]["pending_id"]
    results = await asyncio.gather(
        respond(live, pid, {"option_id": "o1"}), respond(live, pid, {"option_id": "o2"})
    )
    statuses = sorted(status for status, _ in results)
    assert statuses == [200, 409], results
    (loser,) = [body for status, body in results if status == 409]
    assert loser["error"] == "not_active"
    assert loser["state"] in ("delivery_claimed", "terminal")
    (winner,) = [body for status, body in results if status == 200]
    assert winner["outcome"] == "delivered"
    await idle(live, task, session)
    replies = await agent_replies(live, session)
    assert replies[0] == "Checking the build."
    assert replies[1:] in (["Permission: Allow"], ["Permission: Reject"])
    stored = await status_of(live, row["id"])
    assert stored["status"] == "answered"
    assert stored["answer"]["option_labels"] == [replies[1].removeprefix("Permission: ")]
    assert len(updates_of(live, row["id"])) == 1


async def test_a_respond_after_a_newer_turn_is_superseded_and_writes_nothing(live):
    task, session, row = await asked(live)
    pid = row["metadata"]["pending_id"]
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "/reply next"}
    )
    assert response.status_code == 202, response.text
    await eventually(lambda: agent_replies(live, session), lambda r: r[-1:] == ["next"])
    await idle(live, task, session)
    # The agent's request ended with the superseded turn, and nothing was written for it.
    await eventually(lambda: not live.runtime.permissions.waiters.has_waiter(pid))
    assert (await status_of(live, row["id"]))["status"] == "pending"
    assert updates_of(live, row["id"]) == []
    assert (await session_of(live, task, session))["pending_action"] is None
    # ("Permission cancelled." was said in the superseded turn: refused, not stored.)
    assert await agent_replies(live, session) == ["Checking the build.", "next"]

    await live.runtime.projector.stop()  # nothing may write in the background meanwhile
    before = await dump(live.runtime.engine)
    status, body = await respond(live, pid, {"option_id": "o1"})
    assert (status, body["error"], body["state"]) == (409, "not_active", "superseded_history")
    assert await dump(live.runtime.engine) == before
    assert updates_of(live, row["id"]) == []


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"option_id": "o9"},
        {"option_id": ""},
        {"option_id": 1},
        {"option_id": None},
        {"option_id": ["o1"]},
        {"option_id": "o1", "rejected": True},
        {"option_id": "o1\x00"},
        [],
    ],
    ids=["missing", "unknown", "empty", "int", "null", "list", "extra", "nul", "array"],
)
async def test_bad_bodies_are_400_and_write_nothing(live, body):
    task, session, row = await asked(live)
    pid = row["metadata"]["pending_id"]
    await live.runtime.projector.stop()  # nothing may write in the background meanwhile
    before = await dump(live.runtime.engine)
    status, answer = await respond(live, pid, body)
    assert (status, answer["error"]) == (400, "validation"), answer
    assert await dump(live.runtime.engine) == before
    assert live.runtime.permissions.waiters.has_waiter(pid)
    # Still answerable.
    status, _ = await respond(live, pid, {"option_id": "o2"})
    assert status == 200
    await idle(live, task, session)


async def test_malformed_json_is_400(live):
    _task, _session, row = await asked(live)
    response = await live.http.post(
        f"/api/v1/permission/{row['metadata']['pending_id']}/respond",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert (response.status_code, response.json()["error"]) == (400, "validation")


async def test_unknown_invisible_and_other_requests_are_404(live):
    task, session, row = await asked(live)
    pid = row["metadata"]["pending_id"]
    status, body = await respond(live, "no-such-request", {"option_id": "o1"})
    assert (status, body["error"]) == (404, "not_found")
    await add_user(live.runtime.engine, STRANGER, None)
    before = await dump(live.runtime.engine)
    status, body = await respond(live, pid, {"option_id": "o1"}, token=STRANGER)
    assert (status, body["error"]) == (404, "not_found")
    assert await dump(live.runtime.engine) == before
    # The clarification route does not answer permission requests, and vice versa.
    response = await live.http.post(f"/api/v1/clarification/{pid}/respond", json={"rejected": True})
    assert response.status_code == 404
    _question_task, question_session = await start_session(live, "/ask Which? | a | b")
    (bundle,) = await eventually(lambda: bundles(live, question_session), lambda b: len(b) == 1)
    status, body = await respond(live, bundle["pending_id"], {"option_id": "o1"})
    assert (status, body["error"]) == (404, "not_found")
    status, _ = await respond(live, pid, {"option_id": "o1"})
    assert status == 200
    await idle(live, task, session)


async def test_a_killed_agent_cancels_the_request(live):
    task, session, row = await asked(live)
    live.executor.process_of(session).kill()
    await ended_unanswered(live, row, "cancelled")
    listed = await eventually(
        lambda: session_of(live, task, session), lambda s: s["pending_action"] is None
    )
    assert listed["state"] not in ("RUNNING", "WAITING_FOR_INPUT")
    await summary_settled(live, task, None)


async def test_a_terminal_session_expires_the_request(live):
    _task, session, row = await asked(live)
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/state", json={"state": "CANCELLED"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["pending_action"] is None
    await ended_unanswered(live, row, "expired")
    assert await agent_replies(live, session) == ["Checking the build."]


async def test_a_request_no_agent_waits_for_is_cancelled_by_the_respond(live):
    """A pending request of the current turn without a waiter in this process (its agent is
    gone): it cannot be answered; the response cancels it and says so."""
    world = World(live.runtime.engine)
    task = await world.task()
    session = await world.session(task, state=SessionState.WAITING_FOR_INPUT)
    turn = await world.turn(session, started=1)
    pid = await world.question(
        session,
        turn,
        type_=MessageType.PERMISSION_REQUEST,
        question="Run the migration?",
        options=[{"id": "yes", "label": "Yes", "kind": "allow_once"}],
    )
    assert (await session_of(live, task, session))["pending_action"] == "permission"
    status, body = await respond(live, pid, {"option_id": "yes"})
    assert (status, body["error"], body["state"]) == (409, "not_active", "terminal")
    (row,) = await permission_rows(live, session)
    assert row["metadata"]["status"] == "cancelled"
    assert (await session_of(live, task, session))["pending_action"] is None
    assert len(updates_of(live, row["id"])) == 1
    status, body = await respond(live, pid, {"option_id": "yes"})
    assert (status, body["state"]) == (409, "terminal")
    assert len(updates_of(live, row["id"])) == 1


async def test_a_stopping_backend_cancels_the_waiting_request(live):
    task, session, row = await asked(live)
    await live.runtime.permissions.close()
    assert (await status_of(live, row["id"]))["status"] == "cancelled"  # before close returned
    await ended_unanswered(live, row, "cancelled")
    # The agent hears that the request was not granted and ends its turn.
    await eventually(
        lambda: agent_replies(live, session), lambda r: r[-1:] == ["Permission cancelled."]
    )
    assert (await session_of(live, task, session))["pending_action"] is None


@pytest.mark.fault("permission.after_store", "hold", "the choice reaches the agent, 200")
async def test_a_permission_request_is_answerable_live_from_the_moment_it_is_stored(live):
    """``permission.after_store``: committed and not yet announced, the request already has
    its waiter, so a choice made then reaches the agent; before, the row was visible without
    its waiter and the choice cancelled the request ("no agent is waiting")."""
    failpoints.configure("permission.after_store", "hold")
    try:
        task, session = await start_session(live, PERMIT)
        await eventually(lambda: failpoint_hits("permission.after_store"), lambda n: n >= 1)
        (row,) = await permission_rows(live, session)
        responding = asyncio.create_task(
            respond(live, row["metadata"]["pending_id"], {"option_id": "o1"})
        )
        await asyncio.sleep(0.2)  # the waiter holds the choice until the ask goes on
        assert not responding.done()
        failpoints.clear("permission.after_store")
        status, body = await responding
    finally:
        failpoints.clear("permission.after_store")
    assert (status, body["outcome"]) == (200, "delivered")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Checking the build.", "Permission: Allow"]


@pytest.mark.fault(
    "permission.after_store", "error", "no waiter left; the next response cancels it (409)"
)
async def test_a_permission_request_whose_store_outcome_is_unknown_is_cancelled_not_kept(live):
    """A fault right after the request's commit: no waiter is left behind, and the request
    is cancelled by the next response (nobody will hear it) instead of waiting forever."""
    failpoints.configure("permission.after_store", "error", count=1)
    try:
        _task, session = await start_session(live, PERMIT)
        await eventually(lambda: failpoint_hits("permission.after_store"), lambda n: n >= 1)
        (row,) = await permission_rows(live, session)
    finally:
        failpoints.clear("permission.after_store")
    pid = row["metadata"]["pending_id"]
    assert not live.runtime.permissions.waiters.has_waiter(pid)
    status, body = await respond(live, pid, {"option_id": "o1"})
    assert (status, body["error"], body["state"]) == (409, "not_active", "terminal")
    assert (await status_of(live, row["id"]))["status"] == "cancelled"
