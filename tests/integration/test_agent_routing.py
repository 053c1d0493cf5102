"""Each session's prompts reach the worker running its agent (``backend/agents/routing.py``),
on PostgreSQL and a real NATS server: two routers in one process stand for two workers, each
with a recording executor in place of its agents, and each worker's liveness is its advisory
lock, held here on a connection of the test's."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from sqlalchemy import select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend.agents.routing import AgentRouter
from backend.db.engine import write_tx
from backend.db.tables import sessions
from backend.orchestrator.dispatch import (
    PromptDispatcher,
    PromptNotAcknowledged,
    PromptRejected,
    PromptRequest,
    PromptTransportError,
)
from backend.workers import NAMESPACE
from tests.support.builders import World

A, B = "101", "202"


class Agents(PromptDispatcher):
    """A worker's executor: records what it was given, or fails as told."""

    def __init__(self) -> None:
        self.prompts: list[PromptRequest] = []
        self.failure: Exception | None = None
        self.delay_s = 0.0

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:
        await asyncio.sleep(self.delay_s)
        if self.failure is not None:
            raise self.failure
        self.prompts.append(prompt)


class Worker:
    def __init__(self, name: str, engine: AsyncEngine, lock: AsyncConnection) -> None:
        self.name = name
        self.agents = Agents()
        self.router = AgentRouter(self.agents, engine, forward_timeout_s=0.5, worker=name)
        self._lock = lock

    async def die(self) -> None:
        """Its advisory lock is gone (its subject too): the database says it is dead."""
        await self.router.stop()
        await self._lock.execute(
            text("SELECT pg_advisory_unlock(:ns, :key)"), {"ns": NAMESPACE, "key": int(self.name)}
        )
        await self._lock.commit()


@pytest.fixture
async def workers(engine: AsyncEngine, nats_url: str) -> AsyncIterator[tuple[Worker, Worker]]:
    if engine.dialect.name != "postgresql":
        pytest.skip("several workers serve PostgreSQL only")
    instance = uuid.uuid4().hex
    started: list[tuple[Worker, object, AsyncConnection]] = []
    try:
        for name in (A, B):
            lock = await engine.connect()
            await lock.execute(
                text("SELECT pg_advisory_lock(:ns, :key)"), {"ns": NAMESPACE, "key": int(name)}
            )
            await lock.commit()
            worker = Worker(name, engine, lock)
            client = await nats.connect(nats_url)
            await worker.router.start(client, instance)
            started.append((worker, client, lock))
        yield started[0][0], started[1][0]
    finally:
        for worker, client, lock in started:
            await worker.router.stop()
            await client.close()  # type: ignore[attr-defined]
            await lock.invalidate()
            await lock.close()


async def prompt_for(engine: AsyncEngine, owner: str | None) -> PromptRequest:
    session_id = await World(engine).session()
    if owner is not None:
        async with write_tx(engine) as conn:
            await conn.execute(
                update(sessions).where(sessions.c.id == session_id).values(agent_worker=owner)
            )
    return PromptRequest(
        session_id=session_id,
        turn_id="t-1",
        prompt_generation=1,
        content="hello",
        callback_url="http://127.0.0.1:1",
        agent_token="token",
        answer={"answers": [{"message_id": "m-1", "text": "yes"}]},
        agent_worker=owner,
    )


async def owner_of(engine: AsyncEngine, session_id: str) -> str | None:
    async with engine.connect() as conn:
        return (
            await conn.execute(select(sessions.c.agent_worker).where(sessions.c.id == session_id))
        ).scalar_one()


async def test_a_session_nobody_runs_is_taken_by_the_worker_dispatching_it(workers, engine):
    a, b = workers
    prompt = await prompt_for(engine, None)
    await b.router.dispatch_prompt(prompt)
    assert [p.session_id for p in b.agents.prompts] == [prompt.session_id]
    assert a.agents.prompts == []
    assert await owner_of(engine, prompt.session_id) == B


async def test_a_prompt_admitted_on_another_worker_reaches_the_agents_worker_whole(workers, engine):
    a, b = workers
    prompt = await prompt_for(engine, A)
    await b.router.dispatch_prompt(prompt)
    assert b.agents.prompts == []
    assert a.agents.prompts == [prompt]  # every field, the answer included
    assert await owner_of(engine, prompt.session_id) == A


async def test_a_stale_owner_in_the_prompt_is_corrected_by_the_database(workers, engine):
    """The prompt was admitted before the session's agent moved (its owner died): the
    take-over race is lost to the row, and the prompt goes to the owner the row names."""
    a, b = workers
    prompt = await prompt_for(engine, A)
    async with write_tx(engine) as conn:  # someone already took it over from a dead "999"
        await conn.execute(
            update(sessions).where(sessions.c.id == prompt.session_id).values(agent_worker=A)
        )
    stale = dataclasses.replace(prompt, agent_worker="999")
    await b.router.dispatch_prompt(stale)
    assert [p.session_id for p in a.agents.prompts] == [prompt.session_id]
    assert b.agents.prompts == []


@pytest.mark.parametrize(
    ("failure", "expected", "maybe"),
    [
        (PromptRejected("no such profile"), PromptRejected, False),
        (PromptNotAcknowledged("starting", maybe_delivered=False), PromptNotAcknowledged, False),
        (PromptTransportError("pipe broke"), PromptTransportError, True),
        (RuntimeError("boom"), PromptTransportError, True),
    ],
)
async def test_the_owners_failure_reaches_the_sender_in_the_executors_terms(
    workers, engine, failure, expected, maybe
):
    a, b = workers
    a.agents.failure = failure
    prompt = await prompt_for(engine, A)
    with pytest.raises(expected) as raised:
        await b.router.dispatch_prompt(prompt)
    assert raised.value.maybe_delivered is maybe
    assert type(raised.value) is expected
    if not isinstance(failure, RuntimeError):
        assert str(failure) in str(raised.value)
    else:
        assert "boom" not in str(raised.value)  # the owner's internals stay there


async def test_no_reply_in_time_is_maybe_delivered(workers, engine):
    a, b = workers
    a.agents.delay_s = 2.0  # longer than the sender's 0.5 s
    prompt = await prompt_for(engine, A)
    with pytest.raises(PromptTransportError) as raised:
        await b.router.dispatch_prompt(prompt)
    assert raised.value.maybe_delivered


async def test_a_dead_owners_session_is_taken_over_and_its_agent_started_here(workers, engine):
    a, b = workers
    prompt = await prompt_for(engine, A)
    await a.die()
    await b.router.dispatch_prompt(prompt)
    assert [p.session_id for p in b.agents.prompts] == [prompt.session_id]
    assert await owner_of(engine, prompt.session_id) == B


async def test_a_live_owner_that_does_not_answer_is_not_acknowledged_and_keeps_its_session(
    workers, engine
):
    a, b = workers
    prompt = await prompt_for(engine, A)
    await a.router.stop()  # off NATS, but its lock (its life) stays
    with pytest.raises(PromptNotAcknowledged) as raised:
        await b.router.dispatch_prompt(prompt)
    assert not raised.value.maybe_delivered
    assert b.agents.prompts == []
    assert await owner_of(engine, prompt.session_id) == A


async def test_two_workers_dispatching_a_new_session_at_once_agree_on_one_agent(workers, engine):
    a, b = workers
    prompt = await prompt_for(engine, None)
    await asyncio.gather(a.router.dispatch_prompt(prompt), b.router.dispatch_prompt(prompt))
    owner = await owner_of(engine, prompt.session_id)
    running = a if owner == A else b
    idle = b if running is a else a
    assert len(running.agents.prompts) == 2 and idle.agents.prompts == []


async def test_a_deleted_session_is_rejected(workers, engine):
    a, b = workers
    prompt = await prompt_for(engine, None)
    async with write_tx(engine) as conn:
        await conn.execute(sessions.delete().where(sessions.c.id == prompt.session_id))
    with pytest.raises(PromptRejected):
        await b.router.dispatch_prompt(prompt)
    assert a.agents.prompts == [] and b.agents.prompts == []


async def test_a_database_failure_before_anything_was_sent_is_not_acknowledged(
    workers, engine, monkeypatch
):
    a, b = workers
    prompt = await prompt_for(engine, None)

    async def unreachable(*_: object) -> None:
        raise OSError("database unreachable")

    monkeypatch.setattr(b.router, "_take_over", unreachable)
    with pytest.raises(PromptNotAcknowledged) as raised:
        await b.router.dispatch_prompt(prompt)
    assert not raised.value.maybe_delivered
    assert a.agents.prompts == [] and b.agents.prompts == []
