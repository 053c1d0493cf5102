"""Task creation, moves between workflow steps (the workflow guard) and workflow snapshots."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from sqlalchemy import insert, select

from backend import failpoints
from backend.api.schemas import MAX_DESCRIPTION_CHARS, MAX_TITLE_CHARS
from backend.db.engine import read_tx, write_tx
from backend.db.tables import tasks
from backend.ids import new_id
from backend.models import MessageType, Workflow, WorkflowStep, Workspace
from backend.projections.summaries import summaries
from backend.seed import DEFAULT_STEPS
from backend.vocabulary import SessionState
from backend.workflow import GUARD_FAILPOINT
from tests.support.builders import T0, World
from tests.support.http import answer_all, bundles, idle, respond
from tests.support.live import failpoint_hits
from tests.support.processes import eventually

ASK = "/ask Ship it? | Yes | No"


@dataclass
class Board:
    workspace_id: str
    workflow_id: str
    steps: dict[str, str]  # step name -> id


async def board(engine, name: str = "Acme") -> Board:
    """A workspace with its default workflow (Backlog, In Progress, Review, Done)."""
    workspace_id, workflow_id = new_id(), new_id()
    steps = {step: new_id() for step in DEFAULT_STEPS}
    async with write_tx(engine) as conn:
        await conn.execute(
            insert(Workspace.__table__).values(id=workspace_id, name=name, created_at=T0)
        )
        await conn.execute(
            insert(Workflow.__table__).values(
                id=workflow_id, workspace_id=workspace_id, name="Default", created_at=T0
            )
        )
        await conn.execute(
            insert(WorkflowStep.__table__),
            [
                {"id": step_id, "workflow_id": workflow_id, "name": step, "position": position}
                for position, (step, step_id) in enumerate(steps.items())
            ],
        )
    return Board(workspace_id, workflow_id, steps)


async def create(live, **body) -> dict:
    response = await live.http.post("/api/v1/tasks", json=body)
    assert response.status_code == 201, response.text
    return response.json()


async def move(live, task_id: str, step_id: str):
    return await live.http.post(f"/api/v1/tasks/{task_id}/move", json={"workflow_step_id": step_id})


async def stored_task(live, task_id: str):
    async with read_tx(live.runtime.engine) as conn:
        return (await conn.execute(select(tasks).where(tasks.c.id == task_id))).one()


async def task_with_session(live, script: str) -> tuple[Board, str, str]:
    """A task on a default board whose first session ran ``script`` to the end of its turn."""
    b = await board(live.runtime.engine)
    task = (await create(live, title="guarded", workspace_id=b.workspace_id))["id"]
    response = await live.http.post(f"/api/v1/tasks/{task}/task-sessions", json={"prompt": script})
    assert response.status_code == 201, response.text
    return b, task, response.json()["id"]


async def detached(live, script: str = ASK) -> tuple[Board, str, str, dict]:
    b, task, session = await task_with_session(live, script + "\n/disconnect")
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (bundle,) = await bundles(live, session)
    assert bundle["state"] == "active_detached"
    return b, task, session, bundle


def moved_events(live, task_id: str) -> list[dict]:
    return [e.data for e in live.events_of("task.updated") if e.data["task_id"] == task_id]


# -- creating tasks ---------------------------------------------------------------------


async def test_created_task_starts_in_backlog(live):
    b = await board(live.runtime.engine)
    task = await create(live, title="  Write docs  ", description="d", workspace_id=b.workspace_id)
    assert set(task) >= {
        "id",
        "workspace_id",
        "title",
        "workflow_id",
        "workflow_step_id",
        "state",
        "status_summary",
    }
    assert task["title"] == "Write docs"  # surrounding blanks are dropped
    assert (task["workspace_id"], task["workflow_id"]) == (b.workspace_id, b.workflow_id)
    assert (task["workflow_step_id"], task["state"]) == (b.steps["Backlog"], "TODO")
    assert task["status_summary"]["pending_action"] is None
    fetched = (await live.http.get(f"/api/v1/tasks/{task['id']}")).json()
    assert fetched == task
    assert (await stored_task(live, task["id"])).description == "d"
    created = [e.data for e in live.events_of("task.created")]
    assert created == [{"task_id": task["id"], "workspace_id": b.workspace_id}]


async def test_created_task_defaults_to_the_first_workspace_by_name(live):
    later = await board(live.runtime.engine, name="Zeta")
    first = await board(live.runtime.engine, name="Alpha")
    task = await create(live, title="no workspace given")
    assert (task["workspace_id"], task["workflow_step_id"]) == (
        first.workspace_id,
        first.steps["Backlog"],
    )
    task = await create(live, title="by workflow", workflow_id=later.workflow_id)
    assert (task["workspace_id"], task["workflow_step_id"]) == (
        later.workspace_id,
        later.steps["Backlog"],
    )


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"title": ""},
        {"title": "   "},
        {"title": "x" * (MAX_TITLE_CHARS + 1)},
        {"title": 5},
        {"title": None},
        {"title": "t", "description": "x" * (MAX_DESCRIPTION_CHARS + 1)},
        {"title": "t", "description": 3},
        {"title": "t", "workspace_id": ""},
        {"title": "t", "priority": "high"},
        ["t"],
    ],
)
async def test_invalid_create_bodies_are_400(live, body):
    await board(live.runtime.engine)
    response = await live.http.post("/api/v1/tasks", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "validation"


async def test_malformed_json_is_400(live):
    response = await live.http.post(
        "/api/v1/tasks", content=b"{", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"] == "validation"


async def test_create_in_unknown_workspace_or_workflow_is_404(live):
    b = await board(live.runtime.engine)
    other = await board(live.runtime.engine, name="Other")
    for body in (
        {"title": "t", "workspace_id": "nope"},
        {"title": "t", "workflow_id": "nope"},
        {"title": "t", "workspace_id": b.workspace_id, "workflow_id": other.workflow_id},
    ):
        response = await live.http.post("/api/v1/tasks", json=body)
        assert response.status_code == 404, body
        assert response.json()["error"] == "not_found"
    async with read_tx(live.runtime.engine) as conn:
        assert (await conn.execute(select(tasks.c.id))).all() == []


# -- moving tasks -----------------------------------------------------------------------


async def test_move_changes_step_state_and_announces_it(live):
    b = await board(live.runtime.engine)
    task = await create(live, title="t", workspace_id=b.workspace_id)
    before = await stored_task(live, task["id"])

    response = await move(live, task["id"], b.steps["In Progress"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["workflow_step_id"], body["state"]) == (b.steps["In Progress"], "IN_PROGRESS")
    assert body["status_summary"] is not None
    assert (await live.http.get(f"/api/v1/tasks/{task['id']}")).json() == body
    assert (await stored_task(live, task["id"])).updated_at > before.updated_at

    response = await move(live, task["id"], b.steps["Done"])
    assert (response.json()["workflow_step_id"], response.json()["state"]) == (
        b.steps["Done"],
        "DONE",
    )
    expected = {"task_id": task["id"], "workspace_id": b.workspace_id}
    assert moved_events(live, task["id"]) == [expected, expected]


async def test_move_to_the_current_step_is_a_no_op(live):
    b = await board(live.runtime.engine)
    task = await create(live, title="t", workspace_id=b.workspace_id)
    before = await stored_task(live, task["id"])
    response = await move(live, task["id"], b.steps["Backlog"])
    assert response.status_code == 200
    assert response.json() == task
    assert await stored_task(live, task["id"]) == before  # nothing written
    assert moved_events(live, task["id"]) == []


async def test_move_to_a_step_outside_the_tasks_workflow_is_400(live):
    b = await board(live.runtime.engine)
    other = await board(live.runtime.engine, name="Other")
    task = await create(live, title="t", workspace_id=b.workspace_id)
    for step in (other.steps["Done"], "no-such-step"):
        response = await move(live, task["id"], step)
        assert response.status_code == 400, response.text
        assert response.json()["error"] == "validation"
    assert (await stored_task(live, task["id"])).workflow_step_id == b.steps["Backlog"]


async def test_move_of_an_unknown_task_is_404_and_bad_bodies_are_400(live):
    b = await board(live.runtime.engine)
    response = await move(live, "no-such-task", b.steps["Done"])
    assert (response.status_code, response.json()["error"]) == (404, "not_found")
    task = await create(live, title="t", workspace_id=b.workspace_id)
    for body in ({}, {"workflow_step_id": ""}, {"workflow_step_id": 1}, {"step": "x"}):
        response = await live.http.post(f"/api/v1/tasks/{task['id']}/move", json=body)
        assert (response.status_code, response.json()["error"]) == (400, "validation"), body


# -- the workflow guard -----------------------------------------------------------------


async def assert_blocked(live, task: str, step: str, session: str) -> None:
    response = await move(live, task, step)
    assert response.status_code == 409, response.text
    body = response.json()
    assert body["error"] == "clarification_pending"
    assert body["session_ids"] == [session]


@pytest.mark.scenario("S01")
async def test_detached_current_turn_question_blocks_every_move(live):
    b, task, session, bundle = await detached(live)
    for step in ("In Progress", "Done"):
        await assert_blocked(live, task, b.steps[step], session)
    stored = await stored_task(live, task)
    assert (stored.workflow_step_id, stored.state) == (b.steps["Backlog"], "TODO")
    assert moved_events(live, task) == []
    # a move to the current step stays a no-op, and the question is still answerable
    assert (await move(live, task, b.steps["Backlog"])).status_code == 200
    assert [x["pending_id"] for x in await bundles(live, session)] == [bundle["pending_id"]]
    summary = (await live.http.get(f"/api/v1/tasks/{task}")).json()["status_summary"]
    assert summary["pending_action"] == "clarification"


@pytest.mark.scenario("S02")
async def test_newer_ordinary_turn_lifts_the_block(live):
    b, task, session, _ = await detached(live)
    await assert_blocked(live, task, b.steps["Done"], session)
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "carry on"}
    )
    assert response.status_code == 202, response.text
    await idle(live, task, session)
    response = await move(live, task, b.steps["Done"])
    assert response.status_code == 200, response.text
    assert response.json()["workflow_step_id"] == b.steps["Done"]


async def test_answered_question_no_longer_blocks(live):
    b, task, session, bundle = await detached(live)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    response = await move(live, task, b.steps["Review"])
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "REVIEW"


@pytest.mark.scenario("S07")
async def test_skipped_newer_bundle_does_not_rearm_the_older_one(live):
    b, task, session, old = await detached(live, "/ask Old? | A | B")
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "/ask New? | C\n/disconnect"}
    )
    assert response.status_code == 202, response.text
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (new,) = await bundles(live, session)
    assert new["pending_id"] != old["pending_id"]
    await assert_blocked(live, task, b.steps["Done"], session)  # the newer bundle blocks

    status, _ = await respond(live, new["pending_id"], {"rejected": True})
    assert status == 200
    assert await bundles(live, session) == []
    response = await move(live, task, b.steps["Done"])
    assert response.status_code == 200, response.text  # the old bundle stays inert


async def test_pending_permission_does_not_block_but_a_secondary_question_does(live):
    world = World(live.runtime.engine)
    task = await world.task()
    async with write_tx(live.runtime.engine) as conn:
        await conn.execute(
            insert(WorkflowStep.__table__).values(
                id=(done := new_id()), workflow_id=world.workflow_id, name="Done", position=1
            )
        )
    primary = await world.session(task, state=SessionState.WAITING_FOR_INPUT)
    turn = await world.turn(primary, started=1)
    await world.question(primary, turn, type_=MessageType.PERMISSION_REQUEST)
    secondary = await world.session(task, state=SessionState.WAITING_FOR_INPUT, is_primary=False)
    turn = await world.turn(secondary, started=2)
    await world.question(secondary, turn)
    await assert_blocked(live, task, done, secondary)

    await world.turn(secondary, started=3)  # a newer turn supersedes the question
    response = await move(live, task, done)
    assert response.status_code == 200, response.text
    assert (response.json()["state"], response.json()["status_summary"]["pending_action"]) == (
        "DONE",
        "permission",
    )


@pytest.mark.fault(GUARD_FAILPOINT, "error", "503 guard_unavailable; the task did not move")
async def test_failed_guard_read_fails_closed(live):
    b = await board(live.runtime.engine)
    task = (await create(live, title="t", workspace_id=b.workspace_id))["id"]
    failpoints.configure(GUARD_FAILPOINT, "error", count=1)
    response = await move(live, task, b.steps["Done"])
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "guard_unavailable"
    assert await failpoint_hits(GUARD_FAILPOINT) == 1
    stored = await stored_task(live, task)
    assert (stored.workflow_step_id, stored.state) == (b.steps["Backlog"], "TODO")
    assert moved_events(live, task) == []

    response = await move(live, task, b.steps["Done"])  # the read works again: the move too
    assert response.status_code == 200, response.text


# -- snapshots --------------------------------------------------------------------------


async def test_snapshot_lists_steps_in_order_with_their_tasks(live):
    b = await board(live.runtime.engine)
    first = await create(live, title="first", workspace_id=b.workspace_id)
    second = await create(live, title="second", workspace_id=b.workspace_id)
    third = await create(live, title="third", workspace_id=b.workspace_id)
    reviewed = (await move(live, second["id"], b.steps["Review"])).json()
    other = await board(live.runtime.engine, name="Other")
    await create(live, title="elsewhere", workspace_id=other.workspace_id)

    response = await live.http.get(f"/api/v1/workflows/{b.workflow_id}/snapshot")
    assert response.status_code == 200, response.text
    snapshot = response.json()
    assert snapshot["workflow"] == {
        "id": b.workflow_id,
        "workspace_id": b.workspace_id,
        "name": "Default",
    }
    assert [(s["id"], s["name"], s["position"]) for s in snapshot["steps"]] == [
        (b.steps[name], name, position) for position, name in enumerate(DEFAULT_STEPS)
    ]
    by_name = {s["name"]: s["tasks"] for s in snapshot["steps"]}
    assert by_name == {
        "Backlog": [first, third],
        "In Progress": [],
        "Review": [reviewed],
        "Done": [],
    }


async def test_snapshot_of_an_unknown_workflow_is_404(live):
    response = await live.http.get("/api/v1/workflows/nope/snapshot")
    assert (response.status_code, response.json()["error"]) == (404, "not_found")


async def test_snapshot_repairs_stale_summaries(live):
    world = World(live.runtime.engine)
    task = await world.task()
    session = await world.session(task, state=SessionState.IDLE)
    await world.turn(session, started=1)
    async with write_tx(live.runtime.engine) as conn:
        await conn.execute(
            insert(summaries).values(
                task_id=task,
                revision=7,
                pending_action="clarification",
                primary_session_id=session,
                session_state="IDLE",
                updated_at=T0,
            )
        )
    response = await live.http.get(f"/api/v1/workflows/{world.workflow_id}/snapshot")
    assert response.status_code == 200, response.text
    ((found,),) = [s["tasks"] for s in response.json()["steps"]]
    summary = found["status_summary"]
    assert (summary["pending_action"], summary["revision"]) == (None, 8)
    assert (summary["primary_session_id"], summary["session_state"]) == (session, "IDLE")
    updated = live.events_of("task.status_summary.updated")
    assert [e.data["task_id"] for e in updated] == [task]


# -- the on-turn-complete transition ------------------------------------------------------


async def in_progress_task(live) -> tuple[Board, str]:
    b = await board(live.runtime.engine)
    task = (await create(live, title="working", workspace_id=b.workspace_id))["id"]
    assert (await move(live, task, b.steps["In Progress"])).status_code == 200
    return b, task


async def run_session(live, task: str, script: str, state: str = "IDLE") -> str:
    response = await live.http.post(f"/api/v1/tasks/{task}/task-sessions", json={"prompt": script})
    assert response.status_code == 201, response.text
    await idle(live, task, response.json()["id"], state=state)
    return response.json()["id"]


async def test_a_completed_turn_hands_an_in_progress_task_to_review(live):
    b, task = await in_progress_task(live)
    await run_session(live, task, "/reply done")
    await eventually(
        lambda: stored_task(live, task), lambda t: t.workflow_step_id != b.steps["In Progress"]
    )
    stored = await stored_task(live, task)
    assert (stored.workflow_step_id, stored.state) == (b.steps["Review"], "REVIEW")

    async def events() -> list[dict]:
        return moved_events(live, task)

    await eventually(events, lambda e: len(e) == 2)  # the user's move, then the agent's


async def test_a_completed_turn_outside_in_progress_moves_nothing(live):
    b = await board(live.runtime.engine)
    task = (await create(live, title="idle", workspace_id=b.workspace_id))["id"]
    await run_session(live, task, "/reply done")
    stored = await stored_task(live, task)
    assert stored.workflow_step_id == b.steps["Backlog"]
    assert moved_events(live, task) == []


@pytest.mark.scenario("S01")
async def test_a_detached_question_blocks_the_on_turn_complete_transition(live):
    b, task = await in_progress_task(live)
    await run_session(live, task, ASK + "\n/disconnect", state="WAITING_FOR_INPUT")
    # another session of the task completes a turn: the question keeps the task in its step
    await run_session(live, task, "/reply finished elsewhere")
    stored = await stored_task(live, task)
    assert (stored.workflow_step_id, stored.state) == (b.steps["In Progress"], "IN_PROGRESS")
    assert len(moved_events(live, task)) == 1  # only the user's move into In Progress


async def test_a_move_and_a_new_question_serialize_through_the_database(live):
    """The guard's verdict holds until the move commits: a prompt that would bring a new
    question cannot be admitted between the guard's read and the move's update."""
    b, task, session = await task_with_session(live, "/reply ready")
    await idle(live, task, session)
    failpoints.configure(GUARD_FAILPOINT, "hold", count=1)
    moving = asyncio.create_task(move(live, task, b.steps["In Progress"]))
    await eventually(lambda: failpoint_hits(GUARD_FAILPOINT), lambda n: n >= 1)
    prompting = asyncio.create_task(
        live.http.post(
            f"/api/v1/task-sessions/{session}/prompt",
            json={"content": ASK + "\n/disconnect"},
        )
    )
    done, _ = await asyncio.wait({prompting}, timeout=0.5)
    assert not done, "a prompt was admitted while the move held its guard verdict"
    failpoints.clear(GUARD_FAILPOINT)
    assert (await moving).status_code == 200
    assert (await prompting).status_code == 202
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    # the question arrived after the move: it now blocks the next one
    await assert_blocked(live, task, b.steps["Review"], session)
    stored = await stored_task(live, task)
    assert stored.workflow_step_id == b.steps["In Progress"]
