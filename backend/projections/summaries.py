"""Task status summaries: caches of task-level state, repaired on every read that returns them.

A read computes the authoritative ``pending_action`` of its tasks in one statement (the rule),
compares it with the persisted summaries, and repairs only the stale ones with a
compare-and-set on ``revision`` (bounded retry, reloading on a lost race). Only
``pending_action``, ``revision`` and ``updated_at`` are written, so newer unrelated fields
written concurrently are never overwritten. A summary that cannot be repaired is returned as
``None`` (and announced invalidated) instead of a stale value.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from backend import failpoints
from backend.authority import task_pending_actions
from backend.authority.sql import tasks
from backend.clock import utcnow
from backend.db.engine import read_tx, write_tx
from backend.events import Event, EventBus
from backend.models import TaskStatusSummary
from backend.views import iso

log = logging.getLogger(__name__)

summaries = TaskStatusSummary.__table__  # type: ignore[attr-defined]
MAX_CAS_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Summary:
    task_id: str
    revision: int
    pending_action: str | None
    primary_session_id: str | None
    session_state: str | None
    updated_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "pending_action": self.pending_action,
            "primary_session_id": self.primary_session_id,
            "session_state": self.session_state,
            "updated_at": iso(self.updated_at),
        }


class SummaryRepairError(RuntimeError):
    """The compare-and-set kept losing (or failed): the caller must not trust the cache."""


async def _load(engine: AsyncEngine, task_ids: list[str]) -> dict[str, Summary]:
    async with read_tx(engine) as conn:
        rows = await conn.execute(select(summaries).where(summaries.c.task_id.in_(task_ids)))
        return {r.task_id: Summary(**r._mapping) for r in rows}


async def repaired_summaries(
    engine: AsyncEngine, bus: EventBus, tasks_where: ColumnElement[bool]
) -> dict[str, Summary | None]:
    """Every matching task's summary, repaired where its ``pending_action`` is stale."""
    async with read_tx(engine) as conn:
        task_ids = [r.id for r in await conn.execute(select(tasks.c.id).where(tasks_where))]
        truth = await task_pending_actions(conn, tasks_where)
    stored = await _load(engine, task_ids)
    result: dict[str, Summary | None] = {}
    for task_id in task_ids:
        want = truth[task_id].value if task_id in truth else None
        current = stored.get(task_id)
        if current is not None and current.pending_action == want:
            result[task_id] = current
            continue
        try:
            repaired = await _repair(engine, task_id, want, current)
        except Exception as error:
            log.warning("summary of task %s not repaired: %r", task_id, error)
            result[task_id] = None
            await _announce(bus, Event("task.status_summary.invalidated", {"task_id": task_id}))
            continue
        result[task_id] = repaired
        await _announce(
            bus,
            Event(
                "task.status_summary.updated",
                {"task_id": task_id, "status_summary": repaired.to_json()},
            ),
        )
    return result


async def _repair(
    engine: AsyncEngine, task_id: str, want: str | None, current: Summary | None
) -> Summary:
    for _ in range(MAX_CAS_ATTEMPTS):
        await failpoints.hit("summary.cas")
        now = utcnow()
        async with write_tx(engine) as conn:
            if current is None:
                try:
                    async with conn.begin_nested():  # a concurrent insert only undoes this
                        row = (
                            await conn.execute(
                                insert(summaries)
                                .values(
                                    task_id=task_id, revision=1, pending_action=want, updated_at=now
                                )
                                .returning(*summaries.c)
                            )
                        ).first()
                except IntegrityError:
                    row = None  # created concurrently: reload and compare-and-set
            else:
                row = (
                    await conn.execute(
                        update(summaries)
                        .where(
                            summaries.c.task_id == task_id,
                            summaries.c.revision == current.revision,
                        )
                        .values(
                            pending_action=want,
                            revision=summaries.c.revision + 1,
                            updated_at=now,
                        )
                        .returning(*summaries.c)
                    )
                ).first()
        if row is not None:
            return Summary(**row._mapping)
        current = (await _load(engine, [task_id])).get(task_id)
        if current is not None and current.pending_action == want:
            return current  # someone else already converged it
    raise SummaryRepairError(f"summary of {task_id} kept changing")


async def _announce(bus: EventBus, event: Event) -> None:
    """A failed publication does not undo the repair: the response carries the corrected
    summary and other clients converge on their next read or event."""
    try:
        await bus.publish(event)
    except Exception as error:
        log.warning("could not publish %s: %r", event.type, error)
