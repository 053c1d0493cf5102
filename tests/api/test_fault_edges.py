"""Regressions for the lifecycle's fault edges (issue #16; `shared/repro` r1..r13).

Each test drives the real API and mock agent into one exit of a durable operation — an
unexpected error, a cancelled request, a stale ready event, a failed publication — and checks
that the state it leaves is one the spec allows: never a stranded claim, never a guard bypass.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

import backend.orchestrator.resume as resume_module
from backend import failpoints
from backend.clarifications import respond as respond_module
from backend.clarifications.answers import Answer
from backend.db.engine import read_tx
from backend.db.tables import messages, sessions
from backend.db.tables import turns as turns_table
from tests.api.test_ready_events import detached_with_open_turn
from tests.api.test_workflow import board, create, move, stored_task
from tests.support.http import (
    agent_replies,
    answer_all,
    bundles,
    detached_bundle,
    idle,
    live_bundle,
    respond,
    session_of,
    turns,
)
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


async def step_of(live, steps: dict[str, str], task: str) -> str:
    row = await stored_task(live, task)
    return {v: k for k, v in steps.items()}[row.workflow_step_id]


async def in_progress_task(live) -> tuple[str, dict[str, str]]:
    b = await board(live.runtime.engine)
    task = (await create(live, title="t", workspace_id=b.workspace_id))["id"]
    assert (await move(live, task, b.steps["In Progress"])).status_code == 200
    return task, b.steps


async def stored(live, session: str) -> tuple[object, list[object], list[object]]:
    """The session row, its turns and its question rows, straight from the database."""
    async with read_tx(live.runtime.engine) as conn:
        s = (await conn.execute(select(sessions).where(sessions.c.id == session))).one()
        ts = (
            await conn.execute(select(turns_table).where(turns_table.c.session_id == session))
        ).all()
        ms = (
            await conn.execute(
                select(messages).where(
                    messages.c.session_id == session,
                    messages.c.type == "clarification_request",
                )
            )
        ).all()
    return s, list(ts), list(ms)


def claimed(rows: list[object]) -> list[object]:
    return [m for m in rows if m.metadata.get("delivery_intent")]


def answers_of(bundle: dict) -> list[Answer]:
    return [Answer(q["message_id"], (q["options"][0]["id"],), "") for q in bundle["questions"]]


# -- ready events against reservations and successors (r1, r12, r13) ----------------------


@pytest.mark.scenario("S28")
@pytest.mark.fault(
    "resume.after_attempt_mark", "hold", "ready waits; after rollback completes, task stays"
)
async def test_predecessor_ready_during_a_reservation_cannot_move_the_task(live):
    """r1: the predecessor's ready event waits for the reservation; after the rollback the
    predecessor owns the session again, completes normally, and the guard keeps the task."""
    task, steps = await in_progress_task(live)
    failpoints.configure("clarification.before_pause", "hold")  # the asking turn stays open
    r = await live.http.post(
        f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "/ask Ship? | yes\n/disconnect"}
    )
    session = r.json()["id"]
    (bundle,) = await eventually(
        lambda: bundles(live, session), lambda b: len(b) == 1 and b[0]["state"] == "active_detached"
    )
    await eventually(lambda: failpoint_hits("clarification.before_pause"), lambda n: n >= 1)
    (asking,) = await turns(live, session)

    await live.agent_fault("reject", count=1)
    failpoints.configure("resume.after_attempt_mark", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("resume.after_attempt_mark"), lambda n: n >= 1)

    failpoints.configure("ready.awaits_reservation", "delay")
    late = asyncio.create_task(live.agent_ready(session, asking["id"], 1))
    await eventually(lambda: failpoint_hits("ready.awaits_reservation"), lambda n: n >= 1)
    assert not late.done()
    assert await step_of(live, steps, task) == "In Progress"

    failpoints.clear("resume.after_attempt_mark")
    status, body = await responding
    assert (status, body["retryable"]) == (500, True)
    assert await late is True  # a normal completion
    assert await step_of(live, steps, task) == "In Progress"  # the guard saw the question
    s = await session_of(live, task, session)
    assert (s["state"], s["pending_action"]) == ("WAITING_FOR_INPUT", "clarification")
    assert [b["state"] for b in await bundles(live, session)] == ["active_detached"]
    failpoints.clear("clarification.before_pause")


@pytest.mark.scenario("S28")
async def test_stale_ready_after_an_ordinary_successor_changes_nothing(live):
    """r12: a ready event for the superseded turn runs no completion action."""
    task, steps = await in_progress_task(live)
    r = await live.http.post(
        f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "/ask Q? | yes\n/wait 600"}
    )
    session = r.json()["id"]
    await eventually(lambda: bundles(live, session), lambda x: len(x) == 1)
    (first,) = await turns(live, session)
    failpoints.configure("clarification.before_store", "hold")  # the successor stays running
    p = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "/ask Later? | ok"}
    )
    assert p.status_code == 202
    await eventually(lambda: failpoint_hits("clarification.before_store"), lambda n: n >= 1)

    assert await live.agent_ready(session, first["id"], 1) is False
    assert (await session_of(live, task, session))["state"] == "RUNNING"
    assert await step_of(live, steps, task) == "In Progress"
    assert not [e for e in live.events_of("turn.completed") if e.data["turn_id"] == first["id"]]
    failpoints.clear("clarification.before_store")


@pytest.mark.scenario("S28")
async def test_rollback_gives_the_session_back_to_its_predecessor(live):
    """r13: after a refused resume the predecessor's turn is current again: its output is
    accepted and its pause completes it, and the answer can be sent again."""
    task, session, bundle, asking = await detached_with_open_turn(live, "Strand?")
    await live.agent_fault("reject", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, True)
    s, ts, _ = await stored(live, session)
    assert (s.prompt_generation, [t.prompt_generation for t in ts]) == (1, [1])

    await live.agent_says(session, asking, 1, "predecessor output")  # accepted
    failpoints.clear("clarification.before_pause")
    await eventually(lambda: turns(live, session), lambda t: t[0]["completed_at"] is not None)
    s = await session_of(live, task, session)
    assert (s["state"], s["pending_action"]) == ("WAITING_FOR_INPUT", "clarification")
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["predecessor output", "Got: Strand?: yes"]


# -- respond's unexpected exits (r3, r10, r11, cancellation) --------------------------------


@pytest.mark.scenario("S16")
async def test_admission_error_restores_the_bundle_and_the_retry_succeeds(live, monkeypatch):
    """r3: an unexpected database error while reserving the successor is a retryable 500
    with the bundle pending again, not a stranded claim."""
    task, session, bundle = await detached_bundle(live, "/ask Admit? | yes")
    real = resume_module.admit_prompt

    async def locked(conn, session_id, turn_metadata=None, expect=None):
        raise OperationalError("INSERT", {}, Exception("database is locked"))

    monkeypatch.setattr(resume_module, "admit_prompt", locked)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["error"], body["retryable"]) == (500, "delivery_failed", True)
    assert "locked" not in str(body)
    _, _, rows = await stored(live, session)
    assert not claimed(rows)
    assert [b["state"] for b in await bundles(live, session)] == ["active_detached"]

    monkeypatch.setattr(resume_module, "admit_prompt", real)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert len(await live.dispatched(session)) == 2


@pytest.mark.scenario("S18")
@pytest.mark.fault("events.publish", "error", "accept_then_fail too: terminal, session freed")
async def test_accept_then_fail_with_a_failed_publication_frees_the_session(live):
    """r10: the agent accepted the answer, the transport then failed and so did publishing
    the successor: the answer stays terminal (no intent), the failed turn is completed, and
    the session takes new prompts."""
    task, session, bundle = await detached_bundle(live, "/ask Publish? | yes")
    await live.agent_fault("accept_then_fail", count=1)
    failpoints.configure("events.publish", "error", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, False)

    _, ts, rows = await stored(live, session)
    assert not claimed(rows) and [m.metadata["status"] for m in rows] == ["answered"]
    assert all(t.completed_at is not None for t in ts)
    assert all("prompt_dispatch_pending" not in t.metadata for t in ts)  # resolved: outbox
    # The agent took the answer and runs it: its own ready event may have closed the turn
    # first and still be on its way to the session state, so the session settles (bounded).
    await idle(live, task, session)
    assert (await respond(live, bundle["pending_id"], answer_all(bundle)))[1]["state"] == (
        "terminal"
    )
    p = await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "hi"})
    assert p.status_code == 202
    deleted = await live.http.delete(f"/api/v1/tasks/{task}")
    assert deleted.status_code in (204, 409)  # 409 only while "hi" is still running


@pytest.mark.scenario("S23")
@pytest.mark.fault(
    "waiter.before_confirm", "hold", "turn no longer current: retired, not retryable"
)
async def test_live_restore_after_the_turn_ended_is_not_retryable(live, monkeypatch):
    """r11: a live confirmation outlives the responder's wait while its turn stops being
    current. A newer prompt cannot do that any more (the claim owns the turn: 409), but a
    terminal session can: the claim is then retired, never restored, and reported
    non-retryable."""
    monkeypatch.setattr(respond_module, "LIVE_CONFIRM_WAIT_S", 1.0)
    _task, session, bundle = await live_bundle(live, "/ask Slow confirm? | yes")
    failpoints.configure("waiter.before_confirm", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("waiter.before_confirm"), lambda n: n >= 1)
    p = await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "hi"})
    assert (p.status_code, p.json()["error"]) == (409, "session_busy")
    done = await live.http.post(
        f"/api/v1/task-sessions/{session}/state", json={"state": "CANCELLED"}
    )
    assert done.status_code == 200
    status, body = await responding
    assert (status, body["retryable"]) == (500, False)
    _, _, rows = await stored(live, session)
    assert [m.metadata["status"] for m in rows] == ["answered"] and not claimed(rows)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["state"]) == (409, "terminal")
    failpoints.clear("waiter.before_confirm")


async def respond_cancelled_at(live, bundle: dict, point: str) -> None:
    """Respond in-process (as the route does) and cancel the request once ``point`` is hit."""
    responding = asyncio.create_task(
        live.runtime.responder.respond(bundle["pending_id"], answers_of(bundle), False, None)
    )
    await eventually(lambda: failpoint_hits(point), lambda n: n >= 1)
    responding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await responding


async def assert_released(live, session: str) -> None:
    """The claim is pending again and the session is as before the response."""
    s, ts, rows = await stored(live, session)
    assert not claimed(rows) and [m.metadata["status"] for m in rows] == ["pending"]
    assert (s.state, s.prompt_generation, len(ts)) == ("WAITING_FOR_INPUT", 1, 1)


@pytest.mark.fault("(respond cancelled)", "hold", "claim restored, reservation rolled back")
@pytest.mark.parametrize(
    "point", ["respond.after_claim", "resume.after_reserve", "resume.after_attempt_mark"]
)
async def test_a_cancelled_respond_releases_its_claim_and_reservation(live, point):
    """The request is cancelled (client gone, shutdown) before the answer could leave: the
    reservation is rolled back and the claim restored in a fresh bounded context."""
    task, session, bundle = await detached_bundle(live, "/ask Cancelled? | yes")
    failpoints.configure(point, "hold")
    await respond_cancelled_at(live, bundle, point)
    await assert_released(live, session)
    failpoints.clear(point)

    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert len(await live.dispatched(session)) == 2


async def test_a_respond_cancelled_during_the_dispatch_settles_its_outcome_first(live):
    """The dispatch call is never cut in half: cancelled while the agent is slow to answer,
    the responder still learns the outcome (here: not acknowledged) and restores the claim."""
    _task, session, bundle = await detached_bundle(live, "/ask Slow agent? | yes")
    await live.agent_fault("timeout", count=1)
    failpoints.configure("resume.after_attempt_mark", "delay")  # counts: the dispatch is next
    await respond_cancelled_at(live, bundle, "resume.after_attempt_mark")
    await assert_released(live, session)


# -- the watchdog's cancellation (r6) --------------------------------------------------------


@pytest.mark.scenario("S26")
@pytest.mark.fault("resume.after_reserve", "hold", "watchdog cancelled: rolled back, not busy")
async def test_watchdog_cancelled_between_reservation_and_attempt_mark_rolls_back(live):
    """r6: agent activity cancels the watchdog while its reservation is not yet attempted:
    the reservation is rolled back, so the session is not left busy."""
    from tests.api.test_watchdog import lost_answer

    task, session, _ = await lost_answer(live, "/ask Watch? | yes")
    failpoints.configure("resume.after_reserve", "hold")
    await eventually(lambda: failpoint_hits("resume.after_reserve"), lambda n: n >= 1, within_s=20)
    (watchdog,) = live.runtime.orchestrator.watchdog._tasks[session]
    live.runtime.orchestrator.watchdog.on_activity(session)  # what every agent callback does
    await asyncio.wait({watchdog}, timeout=5)
    assert watchdog.done()
    failpoints.clear("resume.after_reserve")
    s, ts, _ = await stored(live, session)
    assert (s.prompt_generation, len(ts)) == (1, 1)
    assert s.state == "RUNNING"  # the agent still owns its turn, as before the reservation
    (first,) = ts
    await live.agent_says(session, first.id, 1, "still here")  # the predecessor owns it again
    assert await live.agent_ready(session, first.id, 1) is True
    p = await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "hi"})
    assert p.status_code == 202
    await idle(live, task, session)


# -- terminal states whose expiry cannot run (item 8) ---------------------------------------


@pytest.mark.scenario("S33")
@pytest.mark.fault("session.expire", "error", "200; session.updated carries a clean revision")
async def test_terminal_state_without_expiry_still_publishes_the_clean_projection(live):
    """Expiry fails: the terminal state alone quarantines the question, the live agent is
    told ``expired``, and a revision-bearing ``session.updated`` moves clients to null."""
    task, session, bundle = await live_bundle(live, "/ask Done? | yes")
    before = live.events_of("session.message.added")[-1].data["pending_action_revision"]
    failpoints.configure("session.expire", "error", count=1)
    r = await live.http.post(f"/api/v1/task-sessions/{session}/state", json={"state": "COMPLETED"})
    assert (r.status_code, r.json()["state"]) == (200, "COMPLETED")
    (event,) = [e for e in live.events_of("session.updated") if e.data["session_id"] == session][
        -1:
    ]
    assert event.data["pending_action"] is None
    after = event.data["pending_action_revision"]
    assert (int(after["epoch"]), after["sequence"]) > (int(before["epoch"]), before["sequence"])
    assert await bundles(live, session) == []
    s = await session_of(live, task, session)
    assert (s["state"], s["pending_action"]) == ("COMPLETED", None)
    _, _, rows = await stored(live, session)
    assert [m.metadata["status"] for m in rows] == ["pending"]  # quarantined, not rewritten
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["state"]) == (409, "terminal")


# -- a response in flight owns the turn (found by the model test) ---------------------------


@pytest.mark.fault("respond.after_claim", "hold", "a prompt meanwhile is 409 session_busy")
async def test_a_new_prompt_cannot_supersede_an_answer_in_flight(live):
    """While a response holds its claim, a newer prompt is refused as busy; the answer is
    then delivered in its own turn (before: the prompt superseded it and the answer was lost
    behind a 409 ``session_busy`` from respond)."""
    task, session, bundle = await live_bundle(live, "/ask In flight? | yes")
    failpoints.configure("respond.after_claim", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("respond.after_claim"), lambda n: n >= 1)
    p = await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "hi"})
    assert (p.status_code, p.json()["error"]) == (409, "session_busy")
    assert "being delivered" in p.json()["message"]
    failpoints.clear("respond.after_claim")
    assert (await responding)[1]["outcome"] == "delivered"
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: In flight?: yes"]


@pytest.mark.fault("respond.after_claim", "hold", "claimed bundle blocks the workflow")
async def test_a_claimed_bundle_keeps_the_task_in_its_step(live):
    """A bundle whose answer is in flight may still be restored: neither a ready event's
    transition nor a user's move takes the task out of its step meanwhile."""
    task, steps = await in_progress_task(live)
    r = await live.http.post(
        f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "/ask Claimed? | yes\n/wait 600"}
    )
    session = r.json()["id"]
    (bundle,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    (asking,) = await turns(live, session)
    await live.agent_fault("reject", count=1)  # the fallback resume will be refused
    failpoints.configure("respond.after_claim", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("respond.after_claim"), lambda n: n >= 1)

    assert await live.agent_ready(session, asking["id"], 1) is True
    assert await step_of(live, steps, task) == "In Progress"
    moved = await move(live, task, steps["Done"])
    assert (moved.status_code, moved.json()["error"]) == (409, "clarification_pending")

    failpoints.clear("respond.after_claim")  # waiter gone -> detached resume -> refused
    status, body = await responding
    assert (status, body["retryable"]) == (500, True)
    assert [b["state"] for b in await bundles(live, session)] == ["active_detached"]
    assert await step_of(live, steps, task) == "In Progress"
