"""``/respond``: the state-based contract, through HTTP, with the real mock agent process."""

from __future__ import annotations

import asyncio

import pytest

from backend import failpoints
from backend.clarifications import respond as respond_module
from tests.support.http import (
    agent_replies,
    answer_all,
    bundles,
    detached_bundle,
    idle,
    live_bundle,
    messages,
    respond,
    session_of,
    start_session,
    turns,
)
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


def question_rows(rows: list[dict]) -> list[dict]:
    return [m for m in rows if m["type"] == "clarification_request"]


async def test_live_answer_reaches_the_waiting_agent_in_the_same_turn(live):
    task, session, bundle = await live_bundle(live, "/ask Colour? | Red | Blue")
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle, option=1))
    assert (status, body) == (200, {"pending_id": bundle["pending_id"], "outcome": "delivered"})

    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Colour?: Blue"]
    assert len(await turns(live, session)) == 1  # answered inside the asking turn
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "answered"
    assert "delivery_intent" not in row["metadata"]
    assert len(await live.dispatched(session)) == 1


async def test_live_skip_is_delivered_as_a_rejection(live):
    task, session, bundle = await live_bundle(live, "/ask Proceed?")
    assert await respond(live, bundle["pending_id"], {"rejected": True, "reason": "not now"}) == (
        200,
        {"pending_id": bundle["pending_id"], "outcome": "rejected"},
    )
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Skipped."]
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "rejected"
    assert row["metadata"]["reason"] == "not now"


async def test_detached_answer_resumes_the_agent_once(live):
    task, session, bundle = await detached_bundle(live, "/ask Which DB? | SQLite | PostgreSQL")
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle, option=1))
    assert (status, body["outcome"]) == (200, "resumed")

    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Which DB?: PostgreSQL"]
    assert len(await turns(live, session)) == 2
    assert len(await live.dispatched(session)) == 2  # the first prompt and one resume
    assert await bundles(live, session) == []
    assert (await session_of(live, task, session))["pending_action"] is None


async def test_detached_skip_persists_without_resuming_the_agent(live):
    task, session, bundle = await detached_bundle(live, "/ask Ship it?")
    assert (await respond(live, bundle["pending_id"], {"rejected": True}))[1][
        "outcome"
    ] == "rejected"
    assert len(await live.dispatched(session)) == 1
    assert len(await turns(live, session)) == 1
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "rejected"
    assert (await session_of(live, task, session))["pending_action"] is None


@pytest.mark.scenario("S15")
async def test_answer_to_a_superseded_question_is_conflict_and_prompts_nothing(live):
    task, session, bundle = await detached_bundle(live, "/ask Old? | a | b")
    await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "newer"})
    await idle(live, task, session)
    before = await messages(live, session)

    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert status == 409
    assert body["error"] == "not_active" and body["state"] == "superseded_history"
    assert await messages(live, session) == before
    assert len(await live.dispatched(session)) == 2  # the two prompts; no resume


async def test_second_answer_to_a_resolved_bundle_is_terminal_conflict(live):
    task, session, bundle = await detached_bundle(live, "/ask Once? | yes")
    assert (await respond(live, bundle["pending_id"], answer_all(bundle)))[0] == 200
    await idle(live, task, session)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["state"]) == (409, "terminal")
    assert len(await live.dispatched(session)) == 2


@pytest.mark.scenario("S07")
async def test_skipping_the_newer_bundle_leaves_neither_and_cannot_rearm_the_old(live):
    task, session, old = await detached_bundle(live, "/ask Old question?")
    await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt",
        json={"content": "/ask New question?\n/disconnect"},
    )
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (new,) = await bundles(live, session)
    assert new["pending_id"] != old["pending_id"]

    assert (await respond(live, new["pending_id"], {"rejected": True}))[0] == 200
    # Reload: neither bundle, no task question icon.
    assert await bundles(live, session) == []
    assert (await session_of(live, task, session))["pending_action"] is None
    # A later turn and its completion do not re-arm the old one.
    await live.http.post(f"/api/v1/task-sessions/{session}/prompt", json={"content": "carry on"})
    await idle(live, task, session)
    assert await bundles(live, session) == []
    assert (await session_of(live, task, session))["pending_action"] is None


async def test_fifty_concurrent_answers_win_once_and_dispatch_once(live):
    task, session, bundle = await detached_bundle(live, "/ask Race? | a | b")
    results = await asyncio.gather(
        *(respond(live, bundle["pending_id"], answer_all(bundle)) for _ in range(50))
    )
    statuses = sorted(status for status, _ in results)
    assert statuses.count(200) == 1
    assert statuses.count(409) == 49
    assert {body["state"] for status, body in results if status == 409} <= {
        "delivery_claimed",
        "terminal",
    }
    await idle(live, task, session)
    assert len(await live.dispatched(session)) == 2
    assert await agent_replies(live, session) == ["Got: Race?: a"]


@pytest.mark.scenario("S16")
@pytest.mark.scenario("S34")
@pytest.mark.fault(
    "agentctl.prompt",
    "timeout",
    "retryable 500, question pending, no superseding turn; retry resumes once",
)
async def test_unacknowledged_resume_keeps_the_question_answerable_and_retry_resumes_once(live):
    task, session, bundle = await detached_bundle(live, "/ask Retry me? | yes")
    await live.agent_fault("timeout", count=1)

    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert status == 500 and body["retryable"] is True
    (again,) = await bundles(live, session)  # pending again, same bundle, same turn
    assert again["pending_id"] == bundle["pending_id"]
    assert len(await turns(live, session)) == 1  # no failed-dispatch turn superseded it
    assert (await session_of(live, task, session))["state"] == "WAITING_FOR_INPUT"

    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    resumes = [
        p
        for p in await live.dispatched(session)
        if p["turn_id"] != (await turns(live, session))[0]["id"]
    ]
    assert len(resumes) == 1
    assert await agent_replies(live, session) == ["Got: Retry me?: yes"]


@pytest.mark.fault("agentctl.prompt", "reject", "retryable 500, rows restored and published")
async def test_refused_resume_restores_the_question(live):
    _task, session, bundle = await detached_bundle(live, "/ask Refuse? | yes")
    await live.agent_fault("reject", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, True)
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "pending"
    assert "delivery_intent" not in row["metadata"] and "answer" not in row["metadata"]
    restored = [
        e
        for e in live.events_of("session.message.updated")
        if e.data["message"]["metadata"].get("status") == "pending"
        and e.data["message"]["id"] == row["id"]
    ]
    assert restored  # clients that saw nothing terminal still converge on "pending"
    assert (await respond(live, bundle["pending_id"], answer_all(bundle)))[0] == 200


@pytest.mark.scenario("S18")
@pytest.mark.fault(
    "agentctl.prompt", "accept_then_fail", "non-retryable 500, answer terminal, dispatched once"
)
async def test_accepted_then_failed_resume_is_non_retryable_and_stays_terminal(live):
    _task, session, bundle = await detached_bundle(live, "/ask Ambiguous? | yes")
    await live.agent_fault("accept_then_fail", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, False)
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "answered"
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["state"]) == (409, "terminal")
    await eventually(lambda: live.dispatched(session), lambda p: len(p) == 2)
    await asyncio.sleep(0.5)
    assert len(await live.dispatched(session)) == 2  # accepted once, never re-sent


@pytest.mark.scenario("S22")
@pytest.mark.fault(
    "waiter.before_confirm", "hold", "agent sees nothing until confirmation; delivered"
)
async def test_live_answer_waits_for_durable_confirmation_before_the_agent_sees_it(live):
    task, session, bundle = await live_bundle(live, "/ask Hold? | yes")
    failpoints.configure("waiter.before_confirm", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("waiter.before_confirm"), lambda n: n >= 1)
    await asyncio.sleep(0.3)
    assert not responding.done()
    assert await agent_replies(live, session) == []  # enqueued, not yet handed to the agent
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["delivery_intent"]  # the claim is durable while confirmation waits

    failpoints.clear("waiter.before_confirm")
    assert (await responding)[1]["outcome"] == "delivered"
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Hold?: yes"]


@pytest.mark.scenario("S23")
@pytest.mark.fault(
    "waiter.before_confirm",
    "hold",
    "restore wins: retryable 500, late confirmation changes nothing",
)
async def test_confirmation_outliving_the_responder_loses_cleanly_to_the_restore(live, monkeypatch):
    task, session, bundle = await live_bundle(live, "/ask Slow? | yes")
    monkeypatch.setattr(respond_module, "LIVE_CONFIRM_WAIT_S", 0.5)
    failpoints.configure("waiter.before_confirm", "hold")

    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, True)
    failpoints.clear("waiter.before_confirm")  # the late confirmation finds nothing to finalize

    (again,) = await eventually(
        lambda: bundles(live, session), lambda b: len(b) == 1 and b[0]["state"] == "active_detached"
    )
    assert again["pending_id"] == bundle["pending_id"]
    assert await agent_replies(live, session) == []  # the agent never saw the restored answer
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Slow?: yes"]


@pytest.mark.parametrize(
    ("make_body", "reason"),
    [
        (lambda b: {"answers": [{"message_id": "nope", "option_ids": [], "text": "x"}]}, "unknown"),
        (
            lambda b: {
                "answers": [{"message_id": b["questions"][0]["message_id"], "option_ids": ["o9"]}]
            },
            "option",
        ),
        (lambda b: {"answers": answer_all(b)["answers"][:1]}, "unanswered"),
        (lambda b: {**answer_all(b), "rejected": True}, "both"),
        (
            lambda b: {
                "answers": [{"message_id": b["questions"][0]["message_id"], "text": "x" * 16385}]
            },
            "oversize",
        ),
        (lambda b: {**answer_all(b), "extra": 1}, "unknown-field"),
        (lambda b: {"answers": "yes"}, "wrong-type"),
        (lambda b: {}, "empty"),
    ],
)
async def test_invalid_responses_are_400_and_change_nothing(live, make_body, reason):
    _task, session, bundle = await detached_bundle(live, "/ask First? | a | b\n/ask Second? | c")
    before = await messages(live, session)
    status, body = await respond(live, bundle["pending_id"], make_body(bundle))
    assert status == 400, (reason, body)
    assert await messages(live, session) == before
    assert len(await live.dispatched(session)) == 1


async def test_unknown_bundle_is_404(live):
    status, body = await respond(live, "no-such-bundle", {"rejected": True})
    assert (status, body["error"]) == (404, "not_found")


@pytest.mark.scenario("S24")
@pytest.mark.fault("respond.after_claim", "hold", "waiter gone: detached delivery at once")
async def test_waiter_gone_after_the_claim_falls_back_to_detached_delivery(live):
    task, session = await start_session(live, "/ask Gone? | yes\n/wait 1")
    (bundle,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    failpoints.configure("respond.after_claim", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("respond.after_claim"), lambda n: n >= 1)
    await idle(live, task, session)  # the agent's wait ran out: it ended its turn unanswered

    failpoints.clear("respond.after_claim")
    status, body = await responding
    # No wait for a confirmation that can no longer come: detached recovery, at once.
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Gone?: yes"]
    assert len(await live.dispatched(session)) == 2


@pytest.mark.scenario("S24")
@pytest.mark.fault("respond.after_claim", "hold", "cancel after the claim: 409, delivered once")
async def test_cancel_after_a_live_claim_cannot_preempt_the_delivery(live):
    """r2: a cancel that arrives once a response claimed the bundle is refused; the live
    delivery then completes in the same turn, and the agent gets exactly one answer."""
    task, session, bundle = await live_bundle(live, "/ask Cancel race? | yes")
    failpoints.configure("respond.after_claim", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("respond.after_claim"), lambda n: n >= 1)

    cancel = await live.http.post(f"/api/v1/clarification/{bundle['pending_id']}/cancel")
    assert (cancel.status_code, cancel.json()["state"]) == (409, "delivery_claimed")

    failpoints.clear("respond.after_claim")
    assert await responding == (200, {"pending_id": bundle["pending_id"], "outcome": "delivered"})
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Cancel race?: yes"]
    assert len(await live.dispatched(session)) == 1  # the answer went live, not as a prompt
    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "answered" and "delivery_intent" not in row["metadata"]


@pytest.mark.scenario("S24")
async def test_cancellation_after_delivery_won_cannot_preempt_its_confirmation(live):
    task, session, bundle = await live_bundle(live, "/ask Won? | yes")
    failpoints.configure("waiter.before_confirm", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("waiter.before_confirm"), lambda n: n >= 1)

    cancel = await live.http.post(f"/api/v1/clarification/{bundle['pending_id']}/cancel")
    assert cancel.status_code == 404

    failpoints.clear("waiter.before_confirm")
    assert (await responding)[1]["outcome"] == "delivered"
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Won?: yes"]


@pytest.mark.scenario("S17")
@pytest.mark.fault("events.publish", "error", "non-retryable 500, answer terminal, dispatched once")
async def test_accepted_resume_whose_publication_fails_stays_terminal_and_is_not_resent(live):
    _task, session, bundle = await detached_bundle(live, "/ask Publish? | yes")
    failpoints.configure("events.publish", "error", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, False)

    (row,) = question_rows(await messages(live, session))
    assert row["metadata"]["status"] == "answered" and "delivery_intent" not in row["metadata"]
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["state"]) == (409, "terminal")
    await eventually(lambda: agent_replies(live, session), lambda r: r == ["Got: Publish?: yes"])
    assert len(await live.dispatched(session)) == 2  # accepted once; never rolled back or resent


@pytest.mark.scenario("S29")
@pytest.mark.fault("resume.rollback", "error", "non-retryable 500, session busy until recovery")
async def test_failed_rollback_keeps_the_reservation_and_blocks_prompts(live):
    _task, session, bundle = await detached_bundle(live, "/ask Roll back? | yes")
    await live.agent_fault("reject", count=1)
    failpoints.configure("resume.rollback", "error", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, False)
    # Clients converge on "nothing answerable" while recovery owns the claim.
    projected = [
        e.data
        for e in live.events
        if e.data.get("session_id") == session and "pending_action" in e.data
    ]
    assert projected[-1]["pending_action"] is None

    blocked = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "let me in"}
    )
    assert (blocked.status_code, blocked.json()["error"]) == (409, "session_busy")
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert status == 409  # the claim is not offered again before restart recovery
    assert len(await live.dispatched(session)) == 1
