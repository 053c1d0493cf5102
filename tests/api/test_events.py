"""Live events: message events carry the session projection; REST and events share one order."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets

from backend import failpoints
from backend.events.bus import QUEUE_LIMIT, Event
from backend.projections.revision import ProjectionRevision
from tests.support.http import idle, session_of, start_session
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


def revision(data: dict[str, Any]) -> ProjectionRevision:
    return ProjectionRevision.from_json(data["pending_action_revision"])


async def next_frame(ws: Any, match: Any, within_s: float = 10.0) -> dict[str, Any]:
    """The next frame for which ``match(frame)`` holds (others are skipped)."""

    async def wait() -> dict[str, Any]:
        while True:
            frame = json.loads(await ws.recv())
            if match(frame):
                return frame

    return await asyncio.wait_for(wait(), within_s)


def clarification_added(session: str) -> Any:
    return lambda f: (
        f["type"] == "session.message.added"
        and f["data"]["session_id"] == session
        and f["data"]["message"]["type"] == "clarification_request"
    )


async def clean_session(live) -> tuple[str, str, dict]:
    task, session = await start_session(live, "/reply hello")
    await idle(live, task, session)
    snapshot = await session_of(live, task, session)
    assert snapshot["pending_action"] is None
    return task, session, snapshot


@pytest.mark.scenario("S05")
async def test_a_new_question_event_advances_a_cached_clean_projection(live):
    task, session, snapshot = await clean_session(live)
    async with live.websocket() as ws:
        prompted = await live.http.post(
            f"/api/v1/task-sessions/{session}/prompt",
            json={"content": "/ask Which database? | SQLite | PostgreSQL\n/disconnect"},
        )
        assert prompted.status_code == 202
        frame = await next_frame(ws, clarification_added(session))
    data = frame["data"]
    assert data["task_id"] == task
    assert data["pending_action"] == "clarification"  # in the event that brings the question
    assert revision(data) > revision(snapshot)  # so the cached clean projection yields


async def test_clean_projection_is_an_explicit_null(live):
    _task, session, _ = await clean_session(live)
    added = [
        e.data for e in live.events_of("session.message.added") if e.data["session_id"] == session
    ]
    assert added and all("pending_action" in d and d["pending_action"] is None for d in added)


@pytest.mark.fault("events.projection", "error", "message event sent without pending_action")
async def test_failed_projection_omits_the_fields_instead_of_guessing(live):
    _task, session, _ = await clean_session(live)
    failpoints.configure("events.projection", "error", count=1)
    before = len(live.events)
    await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "again"})
    (first, *rest) = [
        e.data
        for e in live.events[before:]
        if e.type == "session.message.added" and e.data["session_id"] == session
    ]
    assert "pending_action" not in first and "pending_action_revision" not in first
    assert all("pending_action" in d for d in rest)


@pytest.mark.scenario("S06")
async def test_an_in_flight_list_is_older_than_an_event_that_overtakes_it(live):
    task, session, _ = await clean_session(live)
    async with live.websocket() as ws:
        failpoints.configure("sessions.list", "hold", count=1)
        listing = asyncio.create_task(live.http.get(f"/api/v1/tasks/{task}/task-sessions"))
        await eventually(lambda: failpoint_hits("sessions.list"), lambda n: n >= 1)
        await live.http.post(
            f"/api/v1/task-sessions/{session}/prompt",
            json={"content": "/ask Overtake? | yes\n/disconnect"},
        )
        event = (await next_frame(ws, clarification_added(session)))["data"]
        failpoints.clear("sessions.list")
        response = await listing
    (stale,) = response.json()["sessions"]
    assert revision(stale) < revision(event)  # a client keeps the event's projection

    # The reverse delivery order: a list read that starts after the event is newer.
    fresh = await session_of(live, task, session)
    assert revision(fresh) > revision(event)
    assert fresh["pending_action"] == event["pending_action"] == "clarification"


@pytest.mark.scenario("S44")
@pytest.mark.fault("sessions.list", "error", "500 internal over REST and WebSocket; no list")
async def test_failed_projection_fails_the_session_list_over_rest_and_websocket(live):
    task, _session, _ = await clean_session(live)
    failpoints.configure("sessions.list", "error")
    response = await live.http.get(f"/api/v1/tasks/{task}/task-sessions")
    assert response.status_code == 500
    assert response.json()["error"] == "internal" and "sessions" not in response.json()
    async with live.websocket() as ws:
        await ws.send(
            json.dumps({"type": "task_sessions.list", "request_id": "r1", "task_id": task})
        )
        frame = await next_frame(ws, lambda f: f["type"] in ("error", "task_sessions.list.result"))
    assert frame["type"] == "error"
    assert (frame["data"]["request_id"], frame["data"]["status"]) == ("r1", 500)


async def test_websocket_lists_sessions_with_the_rest_shape(live):
    task, session, snapshot = await clean_session(live)
    async with live.websocket() as ws:
        await ws.send(json.dumps({"type": "task_sessions.list", "request_id": 7, "task_id": task}))
        frame = await next_frame(ws, lambda f: f["type"] == "task_sessions.list.result")
        await ws.send("not json")
        bad = await next_frame(ws, lambda f: f["type"] == "error")
        await ws.send(json.dumps({"type": "task_sessions.list", "task_id": "nope"}))
        missing = await next_frame(ws, lambda f: f["type"] == "error")
    (listed,) = frame["data"]["sessions"]
    assert frame["data"]["request_id"] == 7
    assert {k: v for k, v in listed.items() if k != "pending_action_revision"} == {
        k: v for k, v in snapshot.items() if k != "pending_action_revision"
    }
    assert revision(listed) > revision(snapshot)
    assert listed["id"] == session
    assert bad["data"]["status"] == 400
    assert missing["data"]["status"] == 404


async def test_turn_events_carry_identity_only(live):
    task, session, _ = await clean_session(live)
    turn_events = [
        e for e in live.events if e.type.startswith("turn.") and e.data["session_id"] == session
    ]
    assert [e.type for e in turn_events] == ["turn.started", "turn.completed"]
    for event in turn_events:
        assert event.data["task_id"] == task
        assert set(event.data) <= {"session_id", "task_id", "turn_id", "status"}


async def test_a_client_too_slow_to_keep_up_is_closed_with_4429_and_can_reconnect(live):
    """Memory per client is bounded: a socket whose undelivered events overflow its queue is
    closed with 4429 (reconnect and reload) instead of growing without end."""
    task, session, _ = await clean_session(live)
    live.runtime.bus.queue_limit = 5
    try:
        async with live.websocket() as ws:
            # Make sure the socket is subscribed (it answers a request only once it is).
            await ws.send(json.dumps({"type": "task_sessions.list", "task_id": task}))
            await next_frame(ws, lambda f: f["type"] == "task_sessions.list.result")
            for n in range(50):  # faster than any forwarding: nothing awaits in between
                await live.runtime.bus.publish(
                    Event("session.updated", {"task_id": task, "session_id": session, "n": n})
                )
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                while True:
                    await asyncio.wait_for(ws.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4429
    finally:
        live.runtime.bus.queue_limit = QUEUE_LIMIT
    async with live.websocket() as again:
        await again.send(json.dumps({"type": "task_sessions.list", "task_id": task}))
        await next_frame(again, lambda f: f["type"] == "task_sessions.list.result")
