"""Task summaries are caches: every read that returns them repairs them first."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import insert, select, update

from backend import failpoints
from backend.db.engine import read_tx, write_tx
from backend.projections.summaries import summaries
from backend.vocabulary import SessionState
from tests.support.builders import T0, World
from tests.support.live import failpoint_hits
from tests.support.processes import eventually


async def task_with_stale_summary(live, pending: str | None = "clarification") -> str:
    world = World(live.runtime.engine)
    task = await world.task()
    session = await world.session(task, state=SessionState.IDLE)
    await world.turn(session, started=1)
    async with write_tx(live.runtime.engine) as conn:
        await conn.execute(
            insert(summaries).values(
                task_id=task,
                revision=7,
                pending_action=pending,
                primary_session_id=session,
                session_state="IDLE",
                updated_at=T0,
            )
        )
    return task


async def task_json(live, task: str) -> dict:
    response = await live.http.get(f"/api/v1/tasks/{task}")
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.scenario("S08")
@pytest.mark.parametrize("route", ["/api/v1/tasks", "/api/v1/boot", "/api/v1/tasks/{task}"])
async def test_stale_pending_action_is_repaired_with_a_newer_revision(live, route):
    task = await task_with_stale_summary(live)
    response = await live.http.get(route.format(task=task))
    body = response.json()
    found = body if "id" in body else next(t for t in body["tasks"] if t["id"] == task)
    summary = found["status_summary"]
    assert summary["pending_action"] is None
    assert summary["revision"] == 8
    assert summary["session_state"] == "IDLE" and summary["primary_session_id"]  # untouched

    again = (await task_json(live, task))["status_summary"]
    assert again["revision"] == 8  # a consistent summary is not rewritten
    updated = live.events_of("task.status_summary.updated")
    assert [e.data["task_id"] for e in updated] == [task]


async def test_missing_summary_is_created_from_the_rule(live):
    world = World(live.runtime.engine)
    task = await world.task()
    session = await world.session(task, state=SessionState.WAITING_FOR_INPUT)
    turn = await world.turn(session, started=1)
    await world.question(session, turn)
    summary = (await task_json(live, task))["status_summary"]
    assert (summary["pending_action"], summary["revision"]) == ("clarification", 1)


async def test_lost_compare_and_set_reloads_and_keeps_newer_unrelated_fields(live):
    task = await task_with_stale_summary(live)
    failpoints.configure("summary.cas", "hold", count=1)
    reading = asyncio.create_task(task_json(live, task))
    await eventually(lambda: failpoint_hits("summary.cas"), lambda n: n >= 1)
    async with write_tx(live.runtime.engine) as conn:  # a concurrent writer wins the race
        await conn.execute(
            update(summaries)
            .where(summaries.c.task_id == task)
            .values(revision=9, session_state="RUNNING")
        )
    failpoints.clear("summary.cas")
    summary = (await reading)["status_summary"]
    assert (summary["pending_action"], summary["revision"]) == (None, 10)
    assert summary["session_state"] == "RUNNING"  # the newer unrelated field survived


async def test_exhausted_repair_invalidates_instead_of_returning_a_stale_summary(live):
    task = await task_with_stale_summary(live)
    failpoints.configure("summary.cas", "error", count=3)
    found = await task_json(live, task)
    assert found["status_summary"] is None
    invalidated = live.events_of("task.status_summary.invalidated")
    assert [e.data["task_id"] for e in invalidated] == [task]
    async with read_tx(live.runtime.engine) as conn:
        row = (await conn.execute(select(summaries).where(summaries.c.task_id == task))).one()
    assert (row.revision, row.pending_action) == (7, "clarification")  # nothing half-written


async def test_repair_is_returned_even_when_publication_fails(live, monkeypatch):
    task = await task_with_stale_summary(live)

    async def broken(event):
        raise RuntimeError("bus down")

    monkeypatch.setattr(live.runtime.bus, "publish", broken)
    summary = (await task_json(live, task))["status_summary"]
    assert (summary["pending_action"], summary["revision"]) == (None, 8)
