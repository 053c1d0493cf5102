"""Two workers serve one PostgreSQL database (the NATS bus between them): an answer reaches the
agent's live wait whichever worker receives it, exactly once; a waiter whose worker died is
answered as a detached question; events from either worker reach the other's clients."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import select

from backend.db.engine import read_tx
from backend.db.json import json_text
from backend.db.tables import messages
from backend.runtime import EXIT_PRESENCE_LOST
from backend.workers import WORKER_KEY
from tests.support.builders import World
from tests.support.postgres import cut_worker_lock_connection
from tests.support.processes import alive, eventually
from tests.workers.conftest import (
    Workers,
    answered_as_detached,
    detached_question,
    heard,
    live_question,
)


@pytest.mark.scenario("S01")
async def test_an_answer_sent_to_the_other_worker_reaches_the_waiting_agent(
    workers: Workers, engine
):
    holder, other = await workers.start(), await workers.start()
    task = await World(engine).task()
    session, bundle = await live_question(holder, task, "/ask Which DB? | SQLite | PostgreSQL")
    # The worker without the waiter knows the question is live (the holder lives).
    (seen,) = await other.bundles(session)
    assert seen["state"] == "active_live"

    response = await other.respond(bundle, option=1)

    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "delivered"
    await eventually(
        lambda: holder.agent_replies(session),
        lambda r: r == ["Got: Which DB?: PostgreSQL"],
        within_s=20,
    )
    assert len(workers.prompts(session)) == 1  # delivered to the wait, not sent as a new prompt
    assert await other.bundles(session) == []


@pytest.mark.scenario("S06")
@pytest.mark.parametrize("wait", ["live", "detached"])
async def test_fifty_concurrent_answers_across_both_workers_claim_once(
    workers: Workers, engine, wait: str
):
    holder, other = await workers.start(), await workers.start()
    task = await World(engine).task()
    if wait == "live":
        session, bundle = await live_question(holder, task, "/ask Ship it? | yes | no")
    else:
        session = await holder.start_session(task, "/ask Ship it? | yes | no\n/disconnect")
        (bundle,) = await eventually(
            lambda: other.bundles(session),
            lambda b: len(b) == 1 and b[0]["state"] == "active_detached",
            within_s=20,
        )

    responses = await asyncio.gather(*(worker.respond(bundle) for worker in [holder, other] * 25))

    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [409] * 49, [r.text for r in responses]
    (won,) = [r.json() for r in responses if r.status_code == 200]
    assert won["outcome"] == ("delivered" if wait == "live" else "resumed")
    assert {r.json()["state"] for r in responses if r.status_code == 409} <= {
        "delivery_claimed",
        "terminal",
    }
    await eventually(
        lambda: holder.agent_replies(session), lambda r: r == ["Got: Ship it?: yes"], within_s=20
    )
    assert len(workers.prompts(session)) == (1 if wait == "live" else 2)


async def test_a_permission_chosen_on_the_other_worker_reaches_the_waiting_agent(
    workers: Workers, engine
):
    holder, other = await workers.start(), await workers.start()
    task = await World(engine).task()
    session, bundle = await live_question(holder, task, "/permit Delete the build directory?")
    assert bundle["kind"] == "permission"

    response = await other.permit(bundle)

    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "delivered"
    await eventually(
        lambda: holder.agent_replies(session), lambda r: r == ["Permission: Allow"], within_s=20
    )
    again = await holder.permit(bundle, option=1)
    assert (again.status_code, again.json()["state"]) == (409, "terminal")


async def test_a_question_whose_worker_died_is_answered_as_a_detached_one(workers: Workers, engine):
    holder, other = await workers.start(), await workers.start()
    task = await World(engine).task()
    session, _ = await live_question(holder, task, "/ask Survive? | yes | no")
    async with other.events() as socket:
        await holder.process.kill()  # its advisory lock goes with its connection
        # The survivor's sweep detaches it as after a disconnect, and its clients hear it.
        frame = await heard(
            socket,
            "session.message.updated",
            session,
            lambda message: bool(message["metadata"].get("agent_disconnected")),
        )
    assert frame["data"]["message"]["metadata"]["status"] == "pending"
    assert frame["data"]["pending_action"] == "clarification"

    await answered_as_detached(workers, other, session, "Got: Survive?: yes")


async def test_a_question_asked_on_one_worker_is_announced_to_the_others_clients(
    workers: Workers, engine
):
    holder, other = await workers.start(), await workers.start()
    task = await World(engine).task()
    async with other.events() as socket:
        session = await holder.start_session(task, "/ask Heard? | yes | no\n/wait 600")
        frame = await heard(
            socket,
            "session.message.added",
            session,
            lambda message: message["type"] == "clarification_request",
        )
    assert frame["data"]["task_id"] == task
    assert frame["data"]["pending_action"] == "clarification"


@pytest.mark.parametrize("point", ["respond.after_claim", "resume.after_reserve"])
async def test_a_worker_killed_mid_answer_leaves_the_question_to_the_other_worker(
    workers: Workers, engine, point: str
):
    """The worker delivering an answer is SIGKILLed (a ``crash`` fault point) after its claim,
    or after reserving the resume; the other worker keeps serving, settles the dead worker's
    leftovers without a restart (its sweep), and the answer sent again resumes the agent once."""
    doomed, survivor = await workers.start(), await workers.start()
    task = await World(engine).task()
    session, bundle = await detached_question(doomed, survivor, task, "/ask Survive? | yes | no")
    armed = await doomed.http.put(f"/api/v1/_test/failpoints/{point}", json={"action": "crash"})
    assert armed.status_code == 204
    with pytest.raises(httpx.HTTPError):
        await doomed.respond(bundle)
    assert await doomed.process.exited() != 0

    # No restart: the survivor settles the claim (or reservation) the dead worker left.
    (again,) = await eventually(
        lambda: survivor.bundles(session),
        lambda b: len(b) == 1 and b[0]["state"] == "active_detached",
        within_s=20,
    )
    assert again["pending_id"] == bundle["pending_id"]
    response = await survivor.respond(again)
    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "resumed"
    await eventually(
        lambda: survivor.agent_replies(session), lambda r: r == ["Got: Survive?: yes"], within_s=30
    )
    assert len(workers.prompts(session)) == 2  # the question's prompt, then exactly one resume
    retry = await survivor.respond(again)
    assert (retry.status_code, retry.json()["state"]) == (409, "terminal")


async def test_a_detached_answer_sent_to_the_other_worker_resumes_the_agent_that_asked(
    workers: Workers, engine
):
    """The resume is a new prompt of the session: it reaches the agent process that asked,
    on the worker running it, instead of starting a second agent on the worker that got the
    answer."""
    holder, other = await workers.start(), await workers.start()
    task = await World(engine).task()
    session, bundle = await detached_question(holder, other, task, "/ask Where? | here | there")

    response = await other.respond(bundle, option=1)

    assert response.status_code == 200, response.text
    assert response.json()["outcome"] == "resumed"
    await eventually(
        lambda: holder.agent_replies(session), lambda r: r == ["Got: Where?: there"], within_s=30
    )
    asked, resumed = workers.prompts(session)
    assert resumed["agent_pid"] == asked["agent_pid"]  # one agent for the session


async def test_every_prompt_of_a_session_reaches_its_one_agent_whichever_worker_admits_it(
    workers: Workers, engine
):
    first, second = await workers.start(), await workers.start()
    task = await World(engine).task()
    session = await first.start_session(task, "hello")
    await eventually(lambda: first.agent_replies(session), lambda r: len(r) == 1, within_s=30)
    for worker, n in [(second, 2), (first, 3), (second, 4)]:
        await eventually(lambda w=worker: w.session_state(task, session), lambda s: s == "IDLE")
        sent = await worker.http.post(
            f"/api/v1/task-sessions/{session}/prompt", json={"content": f"prompt {n}"}
        )
        assert sent.status_code == 202, sent.text
        await eventually(lambda: first.agent_replies(session), lambda r, n=n: len(r) == n)
    prompts = workers.prompts(session)
    assert len(prompts) == 4
    assert len({p["agent_pid"] for p in prompts}) == 1


async def test_the_agent_of_a_dead_worker_is_started_again_by_the_worker_that_gets_its_prompt(
    workers: Workers, engine
):
    doomed, survivor = await workers.start(), await workers.start()
    task = await World(engine).task()
    session = await doomed.start_session(task, "hello")
    await eventually(lambda: survivor.agent_replies(session), lambda r: len(r) == 1, within_s=30)
    await doomed.process.kill()

    sent = await survivor.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "again"}
    )

    assert sent.status_code == 202, sent.text
    await eventually(lambda: survivor.agent_replies(session), lambda r: len(r) == 2, within_s=30)
    before, after = workers.prompts(session)
    assert before["agent_pid"] != after["agent_pid"]
    assert after["acp_session_id"] == before["acp_session_id"]  # the conversation goes on


async def test_a_worker_that_lost_its_lock_stops_and_the_other_takes_its_question_over(
    workers: Workers, engine
):
    """The holder's lock session is ended under it (a database restart, a cut connection):
    the other workers now take it for dead, so it stops at once instead of serving on beside
    them, its agent dies with it, and its question is answered as a detached one."""
    holder, other = await workers.start(), await workers.start()
    task = await World(engine).task()
    session, bundle = await live_question(holder, task, "/ask Still here? | yes | no")
    async with read_tx(engine) as conn:
        owner = (
            await conn.execute(
                select(json_text(messages.c.metadata, WORKER_KEY)).where(
                    messages.c.id == bundle["questions"][0]["message_id"]
                )
            )
        ).scalar_one()
    (asked,) = workers.prompts(session)

    await cut_worker_lock_connection(engine, owner)

    assert await holder.process.exited() == EXIT_PRESENCE_LOST
    assert "stopping this worker" in holder.process.log()
    await eventually(lambda: not alive(asked["agent_pid"]), within_s=10)  # its lifeline
    await answered_as_detached(workers, other, session, "Got: Still here?: yes")
