"""After a detached answer is restored, clients converge before the retryable error returns.

The background summary projector is stopped in these tests, so whatever converged by the time
the response arrives was done synchronously by the respond path itself.
"""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from backend import failpoints
from backend.db.engine import read_tx
from backend.projections.summaries import summaries
from tests.support.http import answer_all, bundles, detached_bundle, respond
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


async def stored_summary(live, task: str) -> dict:
    async with read_tx(live.runtime.engine) as conn:
        row = (await conn.execute(select(summaries).where(summaries.c.task_id == task))).first()
    assert row is not None
    return dict(row._mapping)


async def task_summary(live, task: str) -> dict:
    response = await live.http.get(f"/api/v1/tasks/{task}")
    assert response.status_code == 200, response.text
    return response.json()["status_summary"]


def restored_events(live, session: str, since: int) -> list[dict]:
    """Pending-status message updates of ``session`` published after event number ``since``."""
    return [
        e.data
        for e in live.events[since:]
        if e.type == "session.message.updated"
        and e.data["session_id"] == session
        and e.data["message"]["metadata"]["status"] == "pending"
    ]


async def observe_claim_then_reject(live, script: str) -> tuple[str, str, dict, dict, int, tuple]:
    """Hold the response right after its claim, let a task-list read observe the temporary
    terminal claim, then let the agent refuse the resume. Returns the task, session, bundle,
    the summary the read saw, the event count before the restore, and the response."""
    await live.runtime.projector.stop()
    task, session, bundle = await detached_bundle(live, script)
    assert (await task_summary(live, task))["pending_action"] == "clarification"
    await live.agent_fault("reject", count=1)
    failpoints.configure("respond.after_claim", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("respond.after_claim"), lambda n: n >= 1)
    during = await task_summary(live, task)
    assert during["pending_action"] is None  # the claim is terminal for now
    since = len(live.events)
    failpoints.clear("respond.after_claim")
    return task, session, bundle, during, since, await responding


@pytest.mark.scenario("S39")
async def test_restored_claim_converges_the_summary_before_retryability_is_reported(live):
    task, session, bundle, during, since, (status, body) = await observe_claim_then_reject(
        live, "/ask Converge? | yes"
    )
    assert (status, body["error"], body["retryable"]) == (500, "delivery_failed", True)

    # No read happened since: the respond path itself moved the cache forward.
    stored = await stored_summary(live, task)
    assert stored["pending_action"] == "clarification"
    assert stored["revision"] > during["revision"]
    updated = [
        e.data["status_summary"]
        for e in live.events_of("task.status_summary.updated")
        if e.data["task_id"] == task
    ]
    assert updated[-1]["pending_action"] == "clarification"
    # ...and the restored rows were published, carrying the advanced session projection.
    (restored,) = restored_events(live, session, since)
    assert restored["pending_action"] == "clarification"
    assert restored["pending_action_revision"]["sequence"] >= 1

    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")


@pytest.mark.scenario("S40")
@pytest.mark.fault(
    "events.message", "error", "retryable 500 convergence_failed; rows pending; retry resumes"
)
async def test_failed_publication_after_restore_still_reports_a_safe_retry(live):
    task, session, bundle, _, (status, body) = await _restore_with_fault(live, "events.message")
    assert (status, body["error"], body["retryable"]) == (500, "convergence_failed", True)
    assert "publication" in body["message"]
    assert [b["pending_id"] for b in await bundles(live, session)] == [bundle["pending_id"]]
    assert (await stored_summary(live, task))["pending_action"] == "clarification"
    await _retry_resumes_once(live, session, bundle)


@pytest.mark.scenario("S40")
@pytest.mark.fault(
    "summary.cas", "error", "retryable 500 convergence_failed; rows published; retry resumes"
)
async def test_failed_summary_acknowledgement_after_restore_still_reports_a_safe_retry(live):
    _task, session, bundle, since, (status, body) = await _restore_with_fault(live, "summary.cas")
    assert (status, body["error"], body["retryable"]) == (500, "convergence_failed", True)
    assert "task summary" in body["message"]
    # The restored rows were still published, so other clients leave the terminal snapshot.
    assert len(restored_events(live, session, since)) == 1
    assert [b["pending_id"] for b in await bundles(live, session)] == [bundle["pending_id"]]
    await _retry_resumes_once(live, session, bundle)


async def _restore_with_fault(live, fault: str) -> tuple[str, str, dict, int, tuple]:
    """A refused resume whose post-restore step ``fault`` fails once."""
    await live.runtime.projector.stop()
    task, session, bundle = await detached_bundle(live, "/ask Retry safely? | yes")
    await live.agent_fault("reject", count=1)
    failpoints.configure(fault, "error", count=1)
    since = len(live.events)
    response = await respond(live, bundle["pending_id"], answer_all(bundle))
    return task, session, bundle, since, response


async def _retry_resumes_once(live, session: str, bundle: dict) -> None:
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    # The first dispatch was the session's opening prompt, the refused one was never accepted.
    await eventually(lambda: live.dispatched(session), lambda p: len(p) == 2)
