"""The primary-answer watchdog: a confirmed live answer the agent never acted on."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import update

from backend import failpoints
from backend.db.engine import write_tx
from backend.db.tables import sessions
from backend.orchestrator.admission import admit_prompt
from tests.support.http import (
    agent_replies,
    answer_all,
    idle,
    live_bundle,
    respond,
    session_of,
    turns,
)
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


async def lost_answer(live, script: str) -> tuple[str, str, dict]:
    """A live answer confirmed durably whose HTTP response never reaches the agent."""
    task, session, bundle = await live_bundle(live, script)
    failpoints.configure("waiter.after_confirm", "error", count=1)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "delivered")
    return task, session, bundle


@pytest.mark.fault("waiter.after_confirm", "error", "watchdog re-sends the answer once")
async def test_a_lost_live_answer_is_re_sent_once_by_the_watchdog(live):
    task, session, _ = await lost_answer(live, "/ask Lost? | yes")
    await eventually(lambda: live.dispatched(session), lambda p: len(p) == 2, within_s=20)
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Lost?: yes"]
    await asyncio.sleep(1.5)  # another watchdog period: nothing more is sent
    assert len(await live.dispatched(session)) == 2


@pytest.mark.scenario("S25")
async def test_watchdog_preflight_rejects_an_answer_whose_turn_was_superseded(live):
    task, session, _ = await lost_answer(live, "/ask Superseded? | yes")
    failpoints.configure("watchdog.before_admission", "hold")
    successor = await other_worker_admits_successor(live, session)
    await asyncio.sleep(2.0)  # past the watchdog's delay

    assert await failpoint_hits("watchdog.before_admission") == 0  # stopped at preflight
    assert len(await live.dispatched(session)) == 1
    successor_turn = next(t for t in await turns(live, session) if t["id"] == successor)
    assert successor_turn["completed_at"] is None
    assert (await session_of(live, task, session))["state"] == "RUNNING"


async def other_worker_admits_successor(live, session: str) -> str:
    """Another worker (no in-process hooks here) ends the stuck turn and admits a successor:
    only the database can tell this worker's watchdog."""
    async with write_tx(live.runtime.engine) as conn:
        await conn.execute(update(sessions).where(sessions.c.id == session).values(state="IDLE"))
        return (await admit_prompt(conn, session)).turn_id


@pytest.mark.scenario("S25")
async def test_watchdog_admission_rejects_a_successor_created_after_preflight(live):
    task, session, _ = await lost_answer(live, "/ask Race the watchdog? | yes")
    failpoints.configure("watchdog.before_admission", "hold")
    await eventually(lambda: failpoint_hits("watchdog.before_admission"), lambda n: n >= 1)

    # Preflight passed; now the successor appears before the serialized admission.
    successor = await other_worker_admits_successor(live, session)
    failpoints.clear("watchdog.before_admission")
    await asyncio.sleep(0.5)

    assert len(await live.dispatched(session)) == 1  # the stale answer was not dispatched
    successor_turn = next(t for t in await turns(live, session) if t["id"] == successor)
    assert successor_turn["completed_at"] is None  # neither prompted nor completed
    state = await session_of(live, task, session)
    assert state["state"] == "RUNNING"


@pytest.mark.scenario("S26")
async def test_session_activity_cancels_the_watchdog_inside_its_fallback(live):
    _task, session, _bundle = await lost_answer(live, "/ask Cancel me? | yes")
    failpoints.configure("watchdog.before_admission", "hold")
    await eventually(lambda: failpoint_hits("watchdog.before_admission"), lambda n: n >= 1)
    (watchdog,) = live.runtime.orchestrator.watchdog._tasks[session]

    (turn,) = await turns(live, session)
    await live.agent_says(session, turn["id"], 1, "still here")  # the agent shows life
    await asyncio.wait({watchdog}, timeout=5)
    assert watchdog.cancelled()  # the cancellation reached the in-flight fallback
    failpoints.clear("watchdog.before_admission")
    await asyncio.sleep(0.3)
    assert len(await live.dispatched(session)) == 1


@pytest.mark.scenario("S26")
async def test_shutdown_cancels_the_watchdog_inside_its_fallback(live):
    _, session, _ = await lost_answer(live, "/ask Shutdown? | yes")
    failpoints.configure("watchdog.before_admission", "hold")
    await eventually(lambda: failpoint_hits("watchdog.before_admission"), lambda n: n >= 1)
    (watchdog,) = live.runtime.orchestrator.watchdog._tasks[session]
    await live.runtime.orchestrator.watchdog.shutdown()
    assert watchdog.cancelled()
    failpoints.clear("watchdog.before_admission")
    await asyncio.sleep(0.3)
    assert len(await live.dispatched(session)) == 1
