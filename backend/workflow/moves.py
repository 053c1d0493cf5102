"""The write transactions behind task creation and moves between workflow steps.

Each function takes the caller's connection, which must be a
:func:`~backend.db.engine.write_tx` transaction; events are published by the caller after
commit (events announce commits, never truth).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.access import Caller
from backend.clock import utcnow
from backend.db.tables import tasks, workflow_steps, workflows, workspaces
from backend.errors import Conflict, DomainError, NotFound
from backend.ids import new_id
from backend.seed import DEFAULT_STEPS, STEP_TASK_STATES
from backend.workflow.guard import assert_can_leave_step, lock_task_for_move


class InvalidStep(DomainError):
    """The requested step is not a step of the task's workflow (400, see
    :func:`move_task_to_step`)."""

    status = 400
    code = "validation"


@dataclass(frozen=True, slots=True)
class MoveResult:
    task_id: str
    workspace_id: str
    workflow_step_id: str
    #: False for a move to the task's current step (a no-op: nothing written).
    moved: bool


def state_for_step(name: str, position: int, first: int, last: int) -> str:
    """The task ``state`` that goes with a step: the default steps map as in the seed data
    (Backlog → TODO, In Progress → IN_PROGRESS, Review → REVIEW, Done → DONE); steps of other
    workflows map by place: first → TODO, last → DONE, anything between → IN_PROGRESS."""
    if name in DEFAULT_STEPS:
        return STEP_TASK_STATES[DEFAULT_STEPS.index(name)]
    if position == first:
        return STEP_TASK_STATES[0]
    if position == last:
        return STEP_TASK_STATES[-1]
    return STEP_TASK_STATES[1]


async def _step_state(conn: AsyncConnection, workflow_id: str, step: Any) -> str:
    first, last = (
        await conn.execute(
            select(func.min(workflow_steps.c.position), func.max(workflow_steps.c.position)).where(
                workflow_steps.c.workflow_id == workflow_id
            )
        )
    ).one()
    return state_for_step(step.name, step.position, first, last)


async def _pick_workflow(
    conn: AsyncConnection, caller: Caller, workspace_id: str | None, workflow_id: str | None
) -> Any:
    """The workflow a new task goes to: the given one, else the workspace's first, else the
    first workflow of the caller's first workspace by name. Workspaces the caller cannot see
    are treated as missing (404)."""
    visible = caller.workspace_filter(workspaces.c.id)
    if workflow_id is not None:
        workflow = (
            await conn.execute(select(workflows).where(workflows.c.id == workflow_id))
        ).first()
        if workflow is not None and not caller.sees_workspace(workflow.workspace_id):
            workflow = None
        if workflow is None or (workspace_id is not None and workflow.workspace_id != workspace_id):
            raise NotFound("no such workflow" + (" in that workspace" if workflow else ""))
        return workflow
    if workspace_id is None:
        workspace_id = (
            await conn.execute(
                select(workspaces.c.id)
                .where(visible)
                .order_by(workspaces.c.name, workspaces.c.id)
                .limit(1)
            )
        ).scalar_one_or_none()
        if workspace_id is None:
            raise NotFound("there is no workspace to create the task in")
    elif (
        await conn.execute(select(workspaces.c.id).where(workspaces.c.id == workspace_id, visible))
    ).first() is None:
        raise NotFound("no such workspace")
    workflow = (
        await conn.execute(
            select(workflows)
            .where(workflows.c.workspace_id == workspace_id)
            .order_by(workflows.c.created_at, workflows.c.id)
            .limit(1)
        )
    ).first()
    if workflow is None:
        raise Conflict("the workspace has no workflow")
    return workflow


async def insert_task_row(
    conn: AsyncConnection,
    caller: Caller,
    *,
    title: str,
    description: str = "",
    workspace_id: str | None = None,
    workflow_id: str | None = None,
) -> dict[str, Any]:
    """Insert a task in the first step (lowest position) of its workflow; returns the row."""
    workflow = await _pick_workflow(conn, caller, workspace_id, workflow_id)
    first = (
        await conn.execute(
            select(workflow_steps)
            .where(workflow_steps.c.workflow_id == workflow.id)
            .order_by(workflow_steps.c.position, workflow_steps.c.id)
            .limit(1)
        )
    ).first()
    if first is None:
        raise Conflict("the workflow has no steps")
    now = utcnow()
    row = {
        "id": new_id(),
        "workspace_id": workflow.workspace_id,
        "workflow_id": workflow.id,
        "workflow_step_id": first.id,
        "title": title,
        "description": description,
        "state": await _step_state(conn, workflow.id, first),
        "created_at": now,
        "updated_at": now,
    }
    await conn.execute(insert(tasks).values(**row))
    return row


async def move_task_to_step(conn: AsyncConnection, task_id: str, step_id: str) -> MoveResult:
    """Move the task to ``step_id`` if the workflow guard allows it; lock, guard and update
    all run in the caller's write transaction, so the guard's verdict still holds at commit
    (see :func:`backend.workflow.guard.lock_task_for_move`).

    - unknown task → :class:`NotFound` (404);
    - a step that is not a step of the task's workflow — another workflow's step or no step at
      all — → :class:`InvalidStep` (400 ``validation``): the step is a value in the request
      body, not the resource the URL names, so it is a bad request rather than a missing
      resource (and a 400 for both cases does not tell whether another workflow's step exists);
    - the task's current step → no-op (``moved=False``), the guard is not consulted;
    - otherwise the guard: 409 ``clarification_pending`` or 503 ``guard_unavailable``;
    - then ``workflow_step_id``, the matching ``state`` and ``updated_at`` are written.
    """
    task = await lock_task_for_move(conn, task_id)
    if task is None:
        raise NotFound("no such task")
    if task.workflow_step_id == step_id:
        return MoveResult(task.id, task.workspace_id, step_id, moved=False)
    step = (
        await conn.execute(
            select(workflow_steps).where(
                workflow_steps.c.id == step_id, workflow_steps.c.workflow_id == task.workflow_id
            )
        )
    ).first()
    if step is None:
        message = "workflow_step_id is not a step of the task's workflow"
        raise InvalidStep(message, details=[{"loc": ["body", "workflow_step_id"], "msg": message}])
    await assert_can_leave_step(conn, task_id)
    await conn.execute(
        update(tasks)
        .where(tasks.c.id == task_id)
        .values(
            workflow_step_id=step.id,
            state=await _step_state(conn, task.workflow_id, step),
            updated_at=utcnow(),
        )
    )
    return MoveResult(task.id, task.workspace_id, step.id, moved=True)


#: On-turn-complete transition of the default workflow: an agent that finishes its turn while
#: the task is "In Progress" hands the task to "Review".
ADVANCE_ON_TURN_COMPLETE = {DEFAULT_STEPS[1]: DEFAULT_STEPS[2]}


#: The transition's step reads, built once (every completed turn asks).
_STEP_NAME = select(workflow_steps.c.name).where(workflow_steps.c.id == bindparam("step"))
_STEP_NAMED = select(workflow_steps.c.id).where(
    workflow_steps.c.workflow_id == bindparam("workflow"),
    workflow_steps.c.name == bindparam("name"),
)


async def advance_on_turn_complete(conn: AsyncConnection, task_id: str) -> MoveResult | None:
    """The workflow transition a completed agent turn triggers, through the same lock and
    guard as a user's move: ``None`` when the task's step has no such transition; raises
    :class:`~backend.workflow.guard.ClarificationPending` while a question is active and
    :class:`~backend.workflow.guard.GuardUnavailable` when that cannot be read."""
    task = await lock_task_for_move(conn, task_id)
    if task is None:
        return None
    current = (await conn.execute(_STEP_NAME, {"step": task.workflow_step_id})).scalar_one_or_none()
    target_name = ADVANCE_ON_TURN_COMPLETE.get(current or "")
    if target_name is None:
        return None
    target = (
        await conn.execute(_STEP_NAMED, {"workflow": task.workflow_id, "name": target_name})
    ).scalar_one_or_none()
    if target is None:
        return None
    return await move_task_to_step(conn, task_id, target)
