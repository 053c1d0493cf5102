"""Kill the real server (a ``crash`` fault point SIGKILLs it) at each boundary of a detached
answer, start it again on the same database, and check through HTTP and the mock agent's
durable record: nothing lost, nothing dispatched twice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from backend.db.engine import read_tx
from backend.db.tables import sessions, turns
from backend.recovery import START_EVENT_PENDING
from tests.support.builders import World
from tests.support.processes import BackendProcess, eventually


@asynccontextmanager
async def backend(
    tmp_path, database_url: str, record: Path
) -> AsyncIterator[tuple[BackendProcess, httpx.AsyncClient]]:
    process = BackendProcess(tmp_path, database_url, record)
    await process.start()
    try:
        async with httpx.AsyncClient(base_url=process.url, timeout=30) as http:
            yield process, http
    finally:
        await process.stop()


async def detached_question(http: httpx.AsyncClient, engine) -> tuple[str, dict]:
    task = await World(engine).task()
    created = await http.post(
        f"/api/v1/tasks/{task}/task-sessions",
        json={"prompt": "/ask Survive a crash? | yes | no\n/disconnect"},
    )
    assert created.status_code == 201, created.text
    session = created.json()["id"]

    async def bundles() -> list[dict]:
        return (await http.get(f"/api/v1/task-sessions/{session}/clarifications")).json()["bundles"]

    (bundle,) = await eventually(
        bundles, lambda b: len(b) == 1 and b[0]["state"] == "active_detached"
    )
    return session, bundle


def answer(bundle: dict) -> dict:
    question = bundle["questions"][0]
    return {"answers": [{"message_id": question["message_id"], "option_ids": ["o1"]}]}


async def crash_while_answering(http, process: BackendProcess, bundle: dict, point: str) -> None:
    armed = await http.put(f"/api/v1/_test/failpoints/{point}", json={"action": "crash"})
    assert armed.status_code == 204
    with pytest.raises(httpx.HTTPError):
        await http.post(
            f"/api/v1/clarification/{bundle['pending_id']}/respond", json=answer(bundle)
        )
    assert await process.exited() != 0


async def respond(http: httpx.AsyncClient, bundle: dict) -> httpx.Response:
    return await http.post(
        f"/api/v1/clarification/{bundle['pending_id']}/respond", json=answer(bundle)
    )


def dispatched(record: Path, session: str) -> list[dict]:
    """Prompts the mock agents recorded for ``session`` (in every backend process's life)."""
    lines = record.read_text().splitlines() if record.exists() else []
    return [p for p in map(json.loads, lines) if p["session_id"] == session]


async def active(http, session: str) -> list[dict]:
    return (await http.get(f"/api/v1/task-sessions/{session}/clarifications")).json()["bundles"]


@pytest.mark.scenario("S21")
@pytest.mark.fault("respond.after_claim", "crash", "question pending again; the retry resumes once")
async def test_crash_after_the_claim_restores_the_question(
    tmp_path, database_url, engine, agent_record
):
    async with backend(tmp_path, database_url, agent_record) as (process, http):
        session, bundle = await detached_question(http, engine)
        await crash_while_answering(http, process, bundle, "respond.after_claim")

    async with backend(tmp_path, database_url, agent_record) as (_, http):
        (again,) = await active(http, session)
        assert again["pending_id"] == bundle["pending_id"]
        retry = await http.post(
            f"/api/v1/clarification/{bundle['pending_id']}/respond", json=answer(bundle)
        )
        assert retry.json()["outcome"] == "resumed"
    assert len(dispatched(agent_record, session)) == 2  # the prompt and one resume


@pytest.mark.scenario("S19")
@pytest.mark.fault(
    "resume.after_reserve",
    "crash",
    "reservation deleted, claimed rows pending; one resume on retry",
)
async def test_crash_after_reserving_rolls_the_reservation_back(
    tmp_path, database_url, engine, agent_record
):
    async with backend(tmp_path, database_url, agent_record) as (process, http):
        session, bundle = await detached_question(http, engine)
        await crash_while_answering(http, process, bundle, "resume.after_reserve")

    async with backend(tmp_path, database_url, agent_record) as (_, http):
        (again,) = await active(http, session)
        assert again["pending_id"] == bundle["pending_id"]
        assert len((await http.get(f"/api/v1/task-sessions/{session}/turns")).json()["turns"]) == 1
        retry = await http.post(
            f"/api/v1/clarification/{bundle['pending_id']}/respond", json=answer(bundle)
        )
        assert retry.json()["outcome"] == "resumed"
    assert len(dispatched(agent_record, session)) == 2


@pytest.mark.scenario("S20")
@pytest.mark.fault(
    "resume.after_attempt_mark", "crash", "successor kept current, answer terminal, never re-sent"
)
async def test_crash_after_the_attempt_mark_keeps_the_answer_terminal(
    tmp_path, database_url, engine, agent_record
):
    async with backend(tmp_path, database_url, agent_record) as (process, http):
        session, bundle = await detached_question(http, engine)
        await crash_while_answering(http, process, bundle, "resume.after_attempt_mark")

    async with backend(tmp_path, database_url, agent_record) as (_, http):
        assert await active(http, session) == []
        retry = await http.post(
            f"/api/v1/clarification/{bundle['pending_id']}/respond", json=answer(bundle)
        )
        assert (retry.status_code, retry.json()["state"]) == (409, "terminal")
        turns_now = (await http.get(f"/api/v1/task-sessions/{session}/turns")).json()["turns"]
        assert len(turns_now) == 2  # the preserved successor is current
    assert len(dispatched(agent_record, session)) == 1  # never sent twice (here: never)


@pytest.mark.scenario("S36")
@pytest.mark.fault(
    "resume.before_publish, resume.before_clear",
    "crash",
    "dispatched once, answer terminal, start event replayed",
)
@pytest.mark.parametrize("point", ["resume.before_publish", "resume.before_clear"])
async def test_crash_after_acknowledgement_replays_the_start_event(
    tmp_path, database_url, engine, agent_record, point
):
    async with backend(tmp_path, database_url, agent_record) as (process, http):
        session, bundle = await detached_question(http, engine)
        await crash_while_answering(http, process, bundle, point)
    # The answer was written to the agent's stdin (acknowledged) before the crash; the agent
    # dies with its worker (backend/agents/lifeline.py), so whether it read the prompt before
    # its SIGTERM is a race. What holds: it was sent once and is never sent again.
    after_crash = len(dispatched(agent_record, session))
    assert after_crash in (1, 2)

    async with backend(tmp_path, database_url, agent_record) as (_, http):
        assert await active(http, session) == []
        retry = await http.post(
            f"/api/v1/clarification/{bundle['pending_id']}/respond", json=answer(bundle)
        )
        assert (retry.status_code, retry.json()["state"]) == (409, "terminal")
        session_now = (
            await http.get(f"/api/v1/tasks/{await task_of(engine, session)}/task-sessions")
        ).json()
        assert session_now["sessions"][0]["state"] == "IDLE"  # usable again after recovery
    async with read_tx(engine) as conn:
        metas = [
            r.metadata
            for r in await conn.execute(
                select(turns.c.metadata).where(turns.c.session_id == session)
            )
        ]
    assert all(START_EVENT_PENDING not in m and "prompt_dispatch_pending" not in m for m in metas)
    assert len(dispatched(agent_record, session)) == after_crash  # never re-sent


async def task_of(engine, session: str) -> str:
    async with read_tx(engine) as conn:
        return (
            await conn.execute(select(sessions.c.task_id).where(sessions.c.id == session))
        ).scalar_one()
