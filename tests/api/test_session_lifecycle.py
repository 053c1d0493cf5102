"""Sessions, turns and clarifications driven through HTTP with the real mock agent process."""

from __future__ import annotations

import pytest
from sqlalchemy import true

from backend import failpoints
from backend.authority import task_pending_actions
from backend.db.engine import read_tx
from backend.errors import TurnNotCurrent
from backend.vocabulary import PendingAction
from tests.support.builders import World
from tests.support.http import (
    bundles,
    detach_events,
    idle,
    messages,
    session_of,
    start_session,
    turns,
)
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


async def test_a_plain_prompt_gets_an_echo_and_the_turn_completes(live):
    task, session = await start_session(live, "hello there")
    await idle(live, task, session)
    transcript = [(m["author"], m["content"]) for m in await messages(live, session)]
    assert transcript == [("user", "hello there"), ("agent", "Echo: hello there")]
    (turn,) = await turns(live, session)
    assert turn["completed_at"] is not None
    assert (await session_of(live, task, session))["pending_action"] is None


@pytest.mark.scenario("S01")
async def test_disconnected_question_stays_visible_and_answerable_after_reload(live):
    task, session = await start_session(
        live, "/ask Which database? | SQLite | PostgreSQL\n/disconnect"
    )
    await idle(live, task, session, state="WAITING_FOR_INPUT")

    # A reload is a fresh read of everything: nothing is held in the browser or the process.
    (bundle,) = await bundles(live, session)
    assert bundle["state"] == "active_detached"
    assert [q["question"] for q in bundle["questions"]] == ["Which database?"]
    assert [o["label"] for o in bundle["questions"][0]["options"]] == ["SQLite", "PostgreSQL"]
    assert (await session_of(live, task, session))["pending_action"] == "clarification"
    async with read_tx(live.runtime.engine) as conn:
        assert (await task_pending_actions(conn, true()))[task] is PendingAction.CLARIFICATION
    (turn,) = await turns(live, session)
    assert turn["completed_at"] is not None  # the agent ended its turn without an answer
    assert len(detach_events(live, session)) == 1


@pytest.mark.scenario("S02")
async def test_newer_turn_supersedes_the_detached_question_without_events(live):
    task, session = await start_session(live, "/ask Old question?\n/disconnect")
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (old,) = await bundles(live, session)

    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "do something else"}
    )
    assert response.status_code == 202, response.text
    await idle(live, task, session)

    assert await bundles(live, session) == []
    assert (await session_of(live, task, session))["pending_action"] is None
    # History is kept, unchanged: the row still says pending and was detached exactly once.
    (row,) = [m for m in await messages(live, session) if m["type"] == "clarification_request"]
    assert row["metadata"]["status"] == "pending"
    assert row["metadata"]["pending_id"] == old["pending_id"]
    assert len(detach_events(live, session)) == 1


async def test_detach_is_a_no_op_the_second_time(live):
    task, session = await start_session(live, "/ask Again?\n/disconnect")
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    # The session waits for input as soon as the question is asked; the agent's own ready
    # event (after it dropped the call) ends the turn a moment later. Replay only after it.
    (turn,) = await eventually(
        lambda: turns(live, session), lambda ts: ts[0]["completed_at"] is not None
    )
    await eventually(lambda: detach_events(live, session), lambda d: len(d) == 1)
    orchestrator = live.runtime.orchestrator
    generation = 1
    assert await orchestrator.turn_complete(session, turn["id"], generation, "completed") is False
    await orchestrator.completion.detach_and_publish(session, turn_id=turn["id"])
    assert len(detach_events(live, session)) == 1


@pytest.mark.scenario("S33")
async def test_terminal_session_expires_its_current_question(live):
    _, session = await start_session(live, "/ask Deploy now? | yes | no\n/wait 600")
    live_bundle = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    assert live_bundle[0]["state"] == "active_live"

    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/state", json={"state": "COMPLETED"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "COMPLETED"
    assert response.json()["pending_action"] is None
    assert await bundles(live, session) == []
    (row,) = [m for m in await messages(live, session) if m["type"] == "clarification_request"]
    assert row["metadata"]["status"] == "expired"
    expired = [
        e
        for e in live.events_of("session.message.updated")
        if e.data["message"]["metadata"].get("status") == "expired"
    ]
    assert len(expired) == 1
    assert not live.runtime.waiters.has_waiter(live_bundle[0]["pending_id"])


@pytest.mark.scenario("S32")
async def test_agent_vanishing_mid_wait_detaches_the_question(live):
    task, session = await start_session(live, "/ask Still there? | yes\n/wait 600")
    (bundle,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    assert bundle["state"] == "active_live"

    agent = live.executor.process_of(session)
    assert agent is not None
    agent.kill()  # the MCP tool call's connection drops: its request is cancelled

    detached = await eventually(
        lambda: bundles(live, session), lambda b: b and b[0]["state"] == "active_detached"
    )
    assert detached[0]["pending_id"] == bundle["pending_id"]
    # The detach is published after it commits: the row can be read before the event arrives.
    (event,) = await eventually(lambda: detach_events(live, session))
    assert event["metadata"]["pending_id"] == bundle["pending_id"]
    assert (await session_of(live, task, session))["pending_action"] == "clarification"


async def test_prompt_while_the_agent_works_is_refused_as_busy(live):
    task, session = await start_session(live, "/sleep 3000\n/reply done")
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "hurry up"}
    )
    assert response.status_code == 409
    assert response.json()["error"] == "session_busy"
    await idle(live, task, session)


async def test_prompt_on_a_terminal_session_is_refused(live):
    task, session = await start_session(live, "hi")
    await idle(live, task, session)
    await live.http.post(f"/api/v1/task-sessions/{session}/state", json={"state": "CANCELLED"})
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "more"}
    )
    assert response.status_code == 409
    assert response.json()["error"] == "session_terminal"


async def test_stale_agent_output_is_refused(live):
    task, session = await start_session(live, "first")
    await idle(live, task, session)
    (old_turn,) = await turns(live, session)
    await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "second"})
    await idle(live, task, session)
    with pytest.raises(TurnNotCurrent):
        await live.agent_says(session, old_turn["id"], 1, "late")
    assert "late" not in [m["content"] for m in await messages(live, session)]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"prompt": ""},
        {"prompt": 42},
        {"prompt": "x", "unexpected": True},
        {"prompt": "x" * (64 * 1024 + 1)},
    ],
    ids=["missing", "empty", "wrong-type", "unknown-field", "oversized"],
)
async def test_bad_session_bodies_are_400_and_write_nothing(live, body):
    task = await World(live.runtime.engine).task()
    response = await live.http.post(f"/api/v1/tasks/{task}/task-sessions", json=body)
    assert response.status_code == 400
    assert response.json()["error"] == "validation"
    listed = await live.http.get(f"/api/v1/tasks/{task}/task-sessions")
    assert listed.json()["sessions"] == []


async def test_unknown_ids_are_404(live):
    assert (await live.http.get("/api/v1/task-sessions/nope/messages")).status_code == 404
    assert (await live.http.get("/api/v1/tasks/nope/task-sessions")).status_code == 404
    response = await live.http.post("/api/v1/tasks/nope/task-sessions", json={"prompt": "x"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"


@pytest.mark.scenario("S10")
async def test_stale_pause_cannot_complete_a_turn_admitted_during_detachment(live):
    task, session = await start_session(live, "/ask Pause? | yes\n/wait 1")
    (asking_turn,) = await turns(live, session)
    failpoints.configure("clarification.before_pause", "hold")
    await eventually(lambda: failpoint_hits("clarification.before_pause"), lambda n: n >= 1)

    # Detached, pause not yet applied: a newer turn is admitted now.
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "/sleep 1500\n/reply later"}
    )
    assert response.status_code == 202
    newer = response.json()["turn_id"]

    failpoints.clear("clarification.before_pause")
    await eventually(
        lambda: turns(live, session),
        lambda ts: next(t for t in ts if t["id"] == asking_turn["id"])["completed_at"] is not None,
    )
    # The stale pause completed only its own turn; the newer one is still running.
    state = await session_of(live, task, session)
    assert state["state"] == "RUNNING"
    assert next(t for t in await turns(live, session) if t["id"] == newer)["completed_at"] is None
    await idle(live, task, session)
    assert "later" in [m["content"] for m in await messages(live, session)]
