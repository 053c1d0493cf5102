"""Fault points the browser lifecycle tests (``tests/e2e/test_lifecycle.py``) hold to order
races: each stops exactly where its name says, and releasing it lets the work finish."""

from __future__ import annotations

import asyncio
import json

import pytest

from backend import failpoints
from backend.projections.revision import ProjectionRevision
from tests.api.test_events import clarification_added, next_frame
from tests.support.http import bundles, idle, session_of, start_session
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


def revision(data: dict) -> ProjectionRevision:
    return ProjectionRevision.from_json(data["pending_action_revision"])


async def clean_session(live) -> tuple[str, str]:
    task, session = await start_session(live, "/reply hello")
    await idle(live, task, session)
    return task, session


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
