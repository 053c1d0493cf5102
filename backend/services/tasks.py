"""Task use cases: the task list, one task, create, move and delete.

Every summary returned is repaired first (:meth:`backend.projections.summaries.TaskSummaries.
repaired_rows`). Creating and moving run the transactions of :mod:`backend.workflow` (the move
through the workflow guard), deleting runs :mod:`backend.task_deletion`; each write is announced
on the bus after it commits.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from sqlalchemy import and_
from sqlalchemy.sql.elements import ColumnElement

from backend.access import Caller, visible_task
from backend.db.engine import read_tx, write_tx
from backend.db.tables import tasks
from backend.errors import NotFound
from backend.events import Event
from backend.runtime import Runtime
from backend.task_deletion import delete_task_rows
from backend.workflow import insert_task_row, move_task_to_step

log = logging.getLogger(__name__)

#: The Task shape of the API contract (plus ``status_summary``), read and nothing more.
TASK_FIELDS = ("id", "workspace_id", "title", "workflow_id", "workflow_step_id", "state")


async def task_views(runtime: Runtime, where: ColumnElement[bool]) -> list[dict[str, Any]]:
    """Tasks in the contract's shape, each with its repaired ``status_summary``."""
    views = []
    for row, summary in await runtime.summaries.repaired_rows(where, TASK_FIELDS):
        view = dict(zip(TASK_FIELDS, row, strict=False))
        view["status_summary"] = summary.to_json() if summary is not None else None
        views.append(view)
    return views


async def one_task_view(runtime: Runtime, task_id: str) -> dict[str, Any]:
    """One task's view, visibility already checked by the caller; 404 when it is gone."""
    views = await task_views(runtime, tasks.c.id == task_id)
    if not views:
        raise NotFound("no such task")
    return views[0]


async def list_visible_tasks(
    runtime: Runtime, caller: Caller, workspace_id: str | None = None
) -> list[dict[str, Any]]:
    """The caller's tasks, optionally of one workspace (an empty id means every workspace)."""
    where = caller.task_filter()
    if workspace_id:
        where = and_(where, tasks.c.workspace_id == workspace_id)
    return await task_views(runtime, where)


async def visible_tasks_by_id(
    runtime: Runtime, caller: Caller, task_ids: Collection[str]
) -> dict[str, dict[str, Any]]:
    """The visible tasks among ``task_ids`` by id; missing or invisible ones are absent."""
    views = await task_views(runtime, and_(caller.task_filter(), tasks.c.id.in_(sorted(task_ids))))
    return {v["id"]: v for v in views}


async def visible_task_view(runtime: Runtime, caller: Caller, task_id: str) -> dict[str, Any]:
    """One task the caller can see (404 when missing or invisible)."""
    async with read_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
    return await one_task_view(runtime, task_id)


async def _announce(runtime: Runtime, event: Event) -> None:
    """After commit: a failed publication does not undo the committed change (clients
    converge on their next read), so it is logged, not returned as an error."""
    try:
        await runtime.events.publish(event)
    except Exception as error:
        log.warning("could not publish %s: %r", event.type, error)


async def add_task(
    runtime: Runtime,
    caller: Caller,
    *,
    title: str,
    description: str = "",
    workspace_id: str | None = None,
    workflow_id: str | None = None,
) -> dict[str, Any]:
    """Create a task in the first step of its workflow and announce it. Without
    ``workflow_id`` the workspace's workflow is used; without ``workspace_id`` the first
    workspace by name (:func:`backend.workflow.insert_task_row`)."""
    async with write_tx(runtime.engine) as conn:
        row = await insert_task_row(
            conn,
            caller,
            title=title,
            description=description,
            workspace_id=workspace_id,
            workflow_id=workflow_id,
        )
    await _announce(
        runtime, Event("task.created", {"task_id": row["id"], "workspace_id": row["workspace_id"]})
    )
    return await one_task_view(runtime, row["id"])


async def move_visible_task(
    runtime: Runtime, caller: Caller, task_id: str, workflow_step_id: str
) -> dict[str, Any]:
    """Move a visible task through the workflow guard and announce it when it moved.

    The guard and the update share one write transaction
    (:func:`backend.workflow.move_task_to_step`, which lists the refusals).
    """
    async with write_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
        result = await move_task_to_step(conn, task_id, workflow_step_id)
    if result.moved:
        await _announce(
            runtime,
            Event("task.updated", {"task_id": result.task_id, "workspace_id": result.workspace_id}),
        )
    return await one_task_view(runtime, task_id)


async def delete_visible_task(runtime: Runtime, caller: Caller, task_id: str) -> None:
    """Delete a visible task and everything of it in one write transaction, then announce
    ``task.deleted``. 404 when missing or invisible; 409 ``task_busy`` while work for it is in
    flight (:mod:`backend.task_deletion`)."""
    async with write_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
        deleted = await delete_task_rows(conn, task_id)
    await _announce(
        runtime,
        Event("task.deleted", {"task_id": deleted.task_id, "workspace_id": deleted.workspace_id}),
    )
