"""Ready events that overlap a detached answer's successor reservation."""

from __future__ import annotations

import asyncio

import pytest

from backend import failpoints
from tests.support.http import (
    agent_replies,
    answer_all,
    bundles,
    idle,
    respond,
    session_of,
    start_session,
    turns,
)
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


async def detached_with_open_turn(live, question: str) -> tuple[str, str, dict, str]:
    """A detached bundle whose asking turn has not yet received its ready event."""
    failpoints.configure("clarification.before_pause", "hold")
    task, session = await start_session(live, f"/ask {question} | yes\n/disconnect")
    (bundle,) = await eventually(
        lambda: bundles(live, session), lambda b: len(b) == 1 and b[0]["state"] == "active_detached"
    )
    await eventually(lambda: failpoint_hits("clarification.before_pause"), lambda n: n >= 1)
    (asking,) = await turns(live, session)
    assert asking["completed_at"] is None
    return task, session, bundle, asking["id"]


@pytest.mark.scenario("S28")
@pytest.mark.fault(
    "resume.after_attempt_mark", "hold", "stale ready event waits, then leaves the successor"
)
async def test_predecessor_ready_event_cannot_complete_the_reserved_successor(live):
    task, session, bundle, asking = await detached_with_open_turn(live, "Overlap?")
    failpoints.configure("resume.after_attempt_mark", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("resume.after_attempt_mark"), lambda n: n >= 1)

    failpoints.configure("ready.awaits_reservation", "delay")  # counts the waits
    failpoints.clear("clarification.before_pause")  # the predecessor's ready event arrives
    await eventually(lambda: failpoint_hits("ready.awaits_reservation"), lambda n: n >= 1)
    assert next(t for t in await turns(live, session) if t["id"] == asking)["completed_at"] is None
    assert (await session_of(live, task, session))["state"] == "RUNNING"  # successor untouched
    assert [t["id"] for t in await turns(live, session)] == [asking]  # successor still hidden

    failpoints.clear("resume.after_attempt_mark")
    assert (await responding)[1]["outcome"] == "resumed"
    await idle(live, task, session)
    # The stale ready event closes its own turn as history once the reservation resolved,
    # which may be after the successor's completion made the session idle.
    await eventually(
        lambda: turns(live, session),
        lambda ts: len(ts) == 2 and all(t["completed_at"] is not None for t in ts),
    )
    assert await agent_replies(live, session) == ["Got: Overlap?: yes"]
    paused = [e for e in live.events_of("turn.completed") if e.data["turn_id"] == asking]
    assert paused == []  # the stale pause ran no completion action (no event, no state)


@pytest.mark.scenario("S28")
async def test_predecessor_ready_event_after_a_rolled_back_reservation_completes_normally(live):
    task, session, bundle, _asking = await detached_with_open_turn(live, "Roll back?")
    await live.agent_fault("reject", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, True)

    failpoints.clear("clarification.before_pause")
    await eventually(
        lambda: turns(live, session),
        lambda ts: len(ts) == 1 and ts[0]["completed_at"] is not None,
    )
    state = await session_of(live, task, session)
    assert (state["state"], state["pending_action"]) == ("WAITING_FOR_INPUT", "clarification")
    assert (await respond(live, bundle["pending_id"], answer_all(bundle)))[1][
        "outcome"
    ] == "resumed"


@pytest.mark.scenario("S31")
async def test_generationless_ready_event_is_dropped_without_changing_anything(live):
    task, session, bundle, asking = await detached_with_open_turn(live, "Generationless?")
    await live.agent_fault("reject", count=1)
    failpoints.configure("resume.after_attempt_mark", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    await eventually(lambda: failpoint_hits("resume.after_attempt_mark"), lambda n: n >= 1)

    late = await live.as_agent(session, f"turns/{asking}/complete", {"status": "completed"})
    assert late.status_code == 400  # no generation: it cannot be correlated, so it is refused
    failpoints.clear("resume.after_attempt_mark")
    assert (await responding)[0] == 500  # the agent refused: the reservation rolls back
    assert next(t for t in await turns(live, session) if t["id"] == asking)["completed_at"] is None
    state = await session_of(live, task, session)
    assert (state["state"], state["pending_action"]) == ("WAITING_FOR_INPUT", "clarification")
    failpoints.clear("clarification.before_pause")
