"""``DELETE /api/v1/tasks/{task_id}``: everything of the task in one transaction, or nothing.

204 removes the task, its sessions, turns, messages and status summary and announces
``task.deleted`` to callers who could see it; 404 for a missing or invisible task; 409
``task_busy`` (nothing written) while a turn is in progress, an answer is being delivered or a
detached resume is reserved. Both databases.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from sqlalchemy import func, select, text, update

from backend import failpoints
from backend.db.engine import read_tx, write_tx
from backend.db.tables import messages, sessions, summaries, tasks, turns
from backend.task_deletion import delete_task_rows
from backend.vocabulary import MessageType, SessionState
from tests.api.test_access import STRANGER, add_user
from tests.support.builders import World
from tests.support.http import (
    agent_replies,
    answer_all,
    detached_bundle,
    dump,
    idle,
    live_bundle,
    respond,
    start_session,
)
from tests.support.live import LiveApi, failpoint_hits
from tests.support.processes import eventually


async def rows_of(live: LiveApi, task_id: str) -> dict[str, int]:
    """How many rows of each table belong to ``task_id``."""
    of_task = select(sessions.c.id).where(sessions.c.task_id == task_id).scalar_subquery()
    queries = {
        "tasks": select(func.count()).where(tasks.c.id == task_id),
        "sessions": select(func.count()).where(sessions.c.task_id == task_id),
        "turns": select(func.count()).where(turns.c.session_id.in_(of_task)),
        "messages": select(func.count()).where(messages.c.session_id.in_(of_task)),
        "summaries": select(func.count()).where(summaries.c.task_id == task_id),
    }
    async with read_tx(live.runtime.engine) as conn:
        return {name: (await conn.execute(q)).scalar_one() for name, q in queries.items()}


async def delete(live: LiveApi, task_id: str, **kwargs: Any) -> Any:
    return await live.http.delete(f"/api/v1/tasks/{task_id}", **kwargs)


async def test_deleting_a_task_removes_it_and_everything_of_it(live):
    task, _, bundle = await detached_bundle(live, "/ask Delete me? | yes")
    second = await live.http.post(
        f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "hi", "is_primary": False}
    )
    await idle(live, task, second.json()["id"])
    other, other_session = await start_session(live, "/reply untouched")
    await idle(live, other, other_session)
    view = (await live.http.get(f"/api/v1/tasks/{task}")).json()
    assert view["status_summary"] is not None
    before = await rows_of(live, task)
    assert min(before.values()) >= 1, before
    kept = await rows_of(live, other)

    response = await delete(live, task)

    assert response.status_code == 204, response.text
    assert response.content == b""
    assert set((await rows_of(live, task)).values()) == {0}
    assert await rows_of(live, other) == kept
    assert (await live.http.get(f"/api/v1/tasks/{task}")).status_code == 404
    assert (await live.http.get(f"/api/v1/tasks/{task}/task-sessions")).status_code == 404
    listed = (await live.http.get("/api/v1/tasks")).json()["tasks"]
    assert task not in [t["id"] for t in listed] and other in [t["id"] for t in listed]
    status, _ = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert status == 404  # the unanswered question went with its task
    (event,) = [e for e in live.events_of("task.deleted") if e.data["task_id"] == task]
    assert event.data == {"task_id": task, "workspace_id": view["workspace_id"]}
    assert (await delete(live, task)).status_code == 404  # already gone


async def test_a_missing_task_is_404_and_writes_nothing(live):
    task, session = await start_session(live, "/reply hi")
    await idle(live, task, session)
    await live.runtime.projector.stop()
    before = await dump(live.runtime.engine)
    response = await delete(live, "no-such-task")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert await dump(live.runtime.engine) == before


async def test_a_stranger_gets_404_and_nothing_is_deleted(live):
    task, session = await start_session(live, "/reply hi")
    await idle(live, task, session)
    await add_user(live.runtime.engine, STRANGER, None)
    await live.runtime.projector.stop()
    before = await dump(live.runtime.engine)
    response = await delete(live, task, headers={"Authorization": f"Bearer {STRANGER}"})
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert await dump(live.runtime.engine) == before
    assert not live.events_of("task.deleted")


async def test_the_deleted_event_reaches_only_callers_who_could_see_the_task(live):
    task, session = await start_session(live, "/reply hi")
    await idle(live, task, session)
    await add_user(live.runtime.engine, STRANGER, None)
    async with live.websocket(STRANGER) as stranger, live.websocket() as local:
        assert (await delete(live, task)).status_code == 204
        frame = json.loads(await asyncio.wait_for(local.recv(), 10))
        while frame["type"] != "task.deleted":
            frame = json.loads(await asyncio.wait_for(local.recv(), 10))
        assert frame["data"]["task_id"] == task
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stranger.recv(), 1.0)


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/v1/tasks/a%00b", 400),
        ("/api/v1/tasks/%25", 404),
        ("/api/v1/tasks/" + "x" * 5000, 404),
        ("/api/v1/tasks/%F0%9F%98%80", 404),
    ],
    ids=["nul", "percent", "huge", "emoji"],
)
async def test_bad_ids_are_clean_4xx_and_write_nothing(live, path, status):
    task, session = await start_session(live, "/reply hi")
    await idle(live, task, session)
    await live.runtime.projector.stop()
    before = await dump(live.runtime.engine)
    response = await live.http.delete(path)
    assert response.status_code == status, response.text
    assert isinstance(response.json()["error"], str)
    assert await dump(live.runtime.engine) == before


async def assert_busy(live: LiveApi, task: str, session: str) -> None:
    await live.runtime.projector.stop()
    before = await dump(live.runtime.engine)
    response = await delete(live, task)
    assert response.status_code == 409, response.text
    body = response.json()
    assert body["error"] == "task_busy"
    assert body["session_ids"] == [session]
    assert await dump(live.runtime.engine) == before
    assert not live.events_of("task.deleted")


async def test_a_live_question_means_a_turn_in_progress(live):
    task, session, _ = await live_bundle(live, "/ask Still waiting? | yes")
    await assert_busy(live, task, session)
    # Cancelling the session ends its work: a terminal session's open turn no longer blocks.
    state = await live.http.post(
        f"/api/v1/task-sessions/{session}/state", json={"state": "CANCELLED"}
    )
    assert state.status_code == 200
    assert (await delete(live, task)).status_code == 204


async def completed_world(live: LiveApi, state: SessionState = SessionState.IDLE) -> World:
    world = World(live.runtime.engine)
    world.session_id = await world.session(state=state)
    world.turn_id = await world.turn(world.session_id, started=1)
    async with write_tx(live.runtime.engine) as conn:
        await conn.execute(
            update(turns).where(turns.c.id == world.turn_id).values(completed_at=func.now())
        )
    return world


@pytest.mark.parametrize("state", [SessionState.CREATED, SessionState.RUNNING])
async def test_a_working_session_blocks(live, state):
    world = await completed_world(live, state)
    await assert_busy(live, world.last_task_id, world.session_id)


@pytest.mark.parametrize(
    "meta",
    [
        {"prompt_dispatch_pending": True},
        {"prompt_dispatch_pending": "1", "prompt_dispatch_attempted": True},
        {"prompt_dispatch_pending": 1},
        {"start_event_pending": "true"},
    ],
    ids=["reservation", "attempted", "numeric-flag", "start-event-outbox"],
)
async def test_outstanding_resume_work_blocks(live, meta):
    world = await completed_world(live)
    await world.turn(world.session_id, started=2, meta=meta)
    async with write_tx(live.runtime.engine) as conn:
        await conn.execute(update(turns).values(completed_at=func.now()))
    await assert_busy(live, world.last_task_id, world.session_id)


async def test_an_unfinished_delivery_intent_blocks(live):
    world = await completed_world(live)
    await world.question(world.session_id, world.turn_id, delivery_intent="intent-1")
    await assert_busy(live, world.last_task_id, world.session_id)


async def test_an_answer_in_delivery_is_never_lost(live):
    task, session, bundle = await detached_bundle(live, "/ask Keep my answer? | yes")
    failpoints.configure("respond.after_claim", "hold")
    responding = asyncio.create_task(respond(live, bundle["pending_id"], answer_all(bundle)))
    try:
        await eventually(lambda: failpoint_hits("respond.after_claim"), lambda n: n >= 1)
        response = await delete(live, task)
        assert response.status_code == 409, response.text
        assert response.json()["error"] == "task_busy"
    finally:
        failpoints.clear("respond.after_claim")
    status, body = await responding
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Keep my answer?: yes"]
    assert (await delete(live, task)).status_code == 204


async def test_an_idle_session_with_a_terminal_request_is_deletable(live):
    world = await completed_world(live)
    await world.question(world.session_id, world.turn_id, status="answered")
    await world.message(world.session_id, world.turn_id, MessageType.MESSAGE)
    assert (await delete(live, world.last_task_id)).status_code == 204
    assert set((await rows_of(live, world.last_task_id)).values()) == {0}


async def test_a_session_started_while_its_task_is_deleted_gets_a_404(live):
    """The session insert waits for the deletion's lock, then finds no task: 404, not a
    foreign-key failure (500). PostgreSQL only: SQLite serialises write transactions, and on
    PostgreSQL the waiting request is visible in ``pg_stat_activity``."""
    if live.runtime.engine.dialect.name != "postgresql":
        pytest.skip("row locks are a PostgreSQL matter; SQLite serialises writers")
    task, session = await start_session(live, "/reply done")
    await idle(live, task, session)
    async with write_tx(live.runtime.engine) as conn:
        await delete_task_rows(conn, task)  # locked and deleted, not yet committed
        start = asyncio.create_task(
            live.http.post(f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "late"})
        )

        async def waiting_on_the_lock() -> bool:
            async with live.runtime.engine.connect() as other:
                waits = await other.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    )
                )
                return waits.scalar_one() > 0

        await eventually(waiting_on_the_lock)
    response = await start
    assert response.status_code == 404, response.text
    assert set((await rows_of(live, task)).values()) == {0}
