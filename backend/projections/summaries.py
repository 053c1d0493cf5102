"""Task status summaries: caches of task-level state, repaired from the one repository rule.

Two writers, one mechanism:

* **Reads** (boot, task list, task detail, workflow snapshot) compute the authoritative
  ``pending_action`` of their tasks in one statement, compare it with the persisted summaries
  and repair only the stale ones. They write only ``pending_action``, ``revision`` and
  ``updated_at``, so newer unrelated fields written concurrently survive. A summary that cannot
  be repaired is returned as ``None`` and announced invalidated instead of a stale value.
* **Refreshes** (the event-driven projector, and the respond path's synchronous
  acknowledgement) recompute every derived field: ``pending_action``, ``primary_session_id``
  and ``session_state``. A refresh that cannot converge raises.

Every write is a compare-and-set on ``revision`` (which only grows), batched: one ``UPDATE``
per distinct target value over ``(task_id, revision) IN (...)``, so the statement count does not
grow with the number of tasks. Rows whose compare-and-set lost are reloaded and retried a
bounded number of times.

A refresh runs after nearly every event of an answer, so its statements are built once with
bound parameters (building a statement costs more event-loop CPU than running it).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar

from sqlalchemy import Row, bindparam, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from backend import failpoints
from backend.authority import Scope, task_pending_actions
from backend.clock import utcnow
from backend.db.engine import read_tx, write_tx
from backend.db.tables import sessions, summaries, tasks
from backend.events import Event, EventBus
from backend.views import iso
from backend.vocabulary import PendingAction

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_CAS_ATTEMPTS = 3
#: Rows per batched statement: far below every supported database's bound-parameter limit.
BATCH = 400

#: The fields a summary derives from the repository (everything but bookkeeping).
Fields = tuple[tuple[str, str | None], ...]
#: Derives the wanted fields of some tasks inside the caller's read snapshot.
WantedFields = Callable[[AsyncConnection, list[str]], Awaitable[dict[str, Fields]]]


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

    def agrees_with(self, fields: Fields) -> bool:
        return all(getattr(self, name) == value for name, value in fields)


#: The columns of a summary row in :class:`Summary` field order (for positional building).
SUMMARY_COLUMNS = tuple(Summary.__dataclass_fields__)


class SummaryRepairError(RuntimeError):
    """The compare-and-set kept losing (or failed): the caller must not trust the cache."""


class TaskSummaries:
    """The one owner of ``task_status_summaries`` writes."""

    def __init__(self, engine: AsyncEngine, bus: EventBus) -> None:
        self.engine = engine
        self.bus = bus

    # -- reads ---------------------------------------------------------------------------

    async def repaired(self, tasks_where: ColumnElement[bool]) -> dict[str, Summary | None]:
        """Every matching task's summary, its ``pending_action`` repaired where stale."""
        return {row.id: summary for row, summary in await self.repaired_rows(tasks_where)}

    async def repaired_rows(
        self, tasks_where: ColumnElement[bool], task_columns: Sequence[str] = ("id",)
    ) -> list[tuple[Row[Any], Summary | None]]:
        """The matching tasks (``task_columns``, in creation order), each with its summary,
        repaired where its ``pending_action`` is stale.

        Two statements read everything, whatever the number of tasks: the rule's pending
        actions and the task rows joined with their stored summaries. They run concurrently
        (on separate connections), so they may see different moments; they only *nominate*
        stale summaries. Each nominee is re-read, truth and cache together in one snapshot,
        before the compare-and-set decides (:meth:`_converge`).
        """
        width = len(task_columns)
        at = task_columns.index("id")

        async def read_truth() -> dict[str, PendingAction]:
            async with read_tx(self.engine) as conn:
                return await task_pending_actions(conn, tasks_where)

        async def read_rows() -> list[Row[Any]]:
            async with read_tx(self.engine) as conn:
                result = await conn.execute(
                    select(
                        *(tasks.c[name] for name in task_columns),
                        *(summaries.c[name] for name in SUMMARY_COLUMNS),
                    )
                    .select_from(tasks.outerjoin(summaries, summaries.c.task_id == tasks.c.id))
                    .where(tasks_where)
                    .order_by(tasks.c.created_at, tasks.c.id)
                )
                return list(result)

        truth, task_rows = await asyncio.gather(read_truth(), read_rows())
        pending_at = width + SUMMARY_COLUMNS.index("pending_action")
        summaries_of: dict[str, Summary | None] = {}
        nominees: list[str] = []
        for row in task_rows:
            action = truth.get(row[at])
            want = action.value if action is not None else None
            if row[width] is not None and row[pending_at] == want:
                summaries_of[row[at]] = Summary(*row[width:])
            else:
                nominees.append(row[at])
        if nominees:
            converged, failed = await self._converge(nominees, _pending_fields)
            summaries_of.update(converged)
            for task_id, stale_revision in failed.items():
                await self._announce(
                    Event(
                        "task.status_summary.invalidated",
                        {"task_id": task_id, "stale_revision": stale_revision},
                    )
                )
        return [(row, summaries_of.get(row[at])) for row in task_rows]

    # -- refreshes -----------------------------------------------------------------------

    async def refresh(self, task_ids: Collection[str]) -> dict[str, Summary]:
        """Recompute every derived field of ``task_ids`` (tasks that no longer exist are
        skipped). Raises :class:`SummaryRepairError` when any of them did not converge."""
        if not task_ids:
            return {}
        converged, failed = await self._converge(list(task_ids), _all_fields)
        if failed:
            raise SummaryRepairError(f"summaries of {sorted(failed)} kept changing")
        return converged

    # -- the compare-and-set -------------------------------------------------------------

    async def _converge(
        self, task_ids: list[str], wanted_of: WantedFields
    ) -> tuple[dict[str, Summary], dict[str, int | None]]:
        """Make each task's summary agree with what ``wanted_of`` derives from the repository.

        Every attempt reads truth and cache in one snapshot, then compare-and-sets the
        disagreeing rows on the revision it read; a row whose compare-and-set lost is read
        again (truth included: the winner may have seen a newer truth than ours), a bounded
        number of times. Returns the converged summaries and, for those that did not
        converge, the revision last seen (``None``: no row).
        """
        converged: dict[str, Summary] = {}
        last_seen: dict[str, int | None] = {}
        remaining = task_ids
        for _ in range(MAX_CAS_ATTEMPTS):
            async with read_tx(self.engine) as conn:
                wanted = await wanted_of(conn, remaining)
                stored = await _load(conn, list(wanted))
            todo: dict[str, Fields] = {}
            for task_id, fields in wanted.items():
                current = stored.get(task_id)
                if current is not None and current.agrees_with(fields):
                    converged[task_id] = current
                else:
                    todo[task_id] = fields
            last_seen = {t: (stored[t].revision if t in stored else None) for t in todo}
            if not todo:
                return converged, {}
            try:
                await failpoints.hit("summary.cas")
                written = await self._write(todo, stored)
            except Exception as error:
                log.warning("summary compare-and-set failed: %r", error)
                break
            for summary in written:
                converged[summary.task_id] = summary
                await self._announce(
                    Event(
                        "task.status_summary.updated",
                        {"task_id": summary.task_id, "status_summary": summary.to_json()},
                    )
                )
            remaining = [t for t in todo if t not in converged]
            if not remaining:
                return converged, {}
        failed = {t: last_seen.get(t) for t in todo if t not in converged}
        for task_id in failed:
            log.warning("summary of task %s not repaired", task_id)
        return converged, failed

    async def _write(
        self, todo: Mapping[str, Fields], stored: Mapping[str, Summary]
    ) -> list[Summary]:
        """One transaction: insert missing rows, compare-and-set existing ones, grouped by
        target values. Returns only the rows this call wrote."""
        now = utcnow()
        missing = [task_id for task_id in todo if task_id not in stored]
        by_target: dict[Fields, list[tuple[str, int]]] = defaultdict(list)
        for task_id, fields in todo.items():
            if task_id in stored:
                by_target[fields].append((task_id, stored[task_id].revision))
        written: list[Summary] = []
        async with write_tx(self.engine) as conn:
            for chunk in _chunks(missing):
                written += await self._insert(conn, [(t, todo[t]) for t in chunk], now)
            for fields, expected in by_target.items():
                stmt = _update_statement(tuple(name for name, _ in fields))
                values = {f"new_{name}": value for name, value in fields}
                for chunk in _chunks(expected):
                    params = {**values, "expected": chunk, "now": now}
                    written += [Summary(**r._mapping) for r in await conn.execute(stmt, params)]
        return written

    async def _insert(
        self, conn: AsyncConnection, rows: list[tuple[str, Fields]], now: datetime
    ) -> list[Summary]:
        """Create missing summaries at revision 1; a concurrently created row is left alone
        (the caller reloads it and compares again)."""
        dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
        stmt = (
            dialect.insert(summaries)
            .values([{"task_id": t, "revision": 1, "updated_at": now, **dict(f)} for t, f in rows])
            .on_conflict_do_nothing(index_elements=[summaries.c.task_id])
            .returning(*summaries.c)
        )
        return [Summary(**r._mapping) for r in await conn.execute(stmt)]

    async def _announce(self, event: Event) -> None:
        """A failed publication does not undo the repair: the response carries the corrected
        summary and other clients converge on their next read or event."""
        try:
            await self.bus.publish(event)
        except Exception as error:
            log.warning("could not publish %s: %r", event.type, error)


@lru_cache(maxsize=4)
def _update_statement(names: tuple[str, ...]) -> Any:
    """The compare-and-set of the fields ``names`` (bound as ``new_<name>``) on the rows whose
    ``(task_id, revision)`` is in ``expected``; one statement per set of fields written."""
    return (
        update(summaries)
        .where(
            tuple_(summaries.c.task_id, summaries.c.revision).in_(
                bindparam("expected", expanding=True)
            )
        )
        .values(
            **{name: bindparam(f"new_{name}") for name in names},
            revision=summaries.c.revision + 1,
            updated_at=bindparam("now"),
        )
        .returning(*summaries.c)
    )


_LOAD = select(*(summaries.c[name] for name in SUMMARY_COLUMNS)).where(
    summaries.c.task_id.in_(bindparam("task_ids", expanding=True))
)
_EXISTING = select(tasks.c.id).where(tasks.c.id.in_(bindparam("task_ids", expanding=True)))
_SESSION_OWNERS = (
    select(sessions.c.task_id, sessions.c.id, sessions.c.state, sessions.c.is_primary)
    .where(sessions.c.task_id.in_(bindparam("task_ids", expanding=True)))
    .order_by(
        sessions.c.task_id,
        sessions.c.is_primary.desc(),
        sessions.c.created_at.desc(),
        sessions.c.id.desc(),
    )
)


async def _load(conn: AsyncConnection, task_ids: list[str]) -> dict[str, Summary]:
    found: dict[str, Summary] = {}
    for chunk in _chunks(task_ids):
        rows = await conn.execute(_LOAD, {"task_ids": chunk})
        found.update((row[0], Summary(*row)) for row in rows)
    return found


async def _pending_fields(conn: AsyncConnection, task_ids: list[str]) -> dict[str, Fields]:
    """What a read repairs: ``pending_action`` only (other fields belong to refreshes)."""
    truth = await task_pending_actions(conn, Scope.tasks(task_ids))
    return {t: (("pending_action", truth[t].value if t in truth else None),) for t in task_ids}


async def _all_fields(conn: AsyncConnection, task_ids: list[str]) -> dict[str, Fields]:
    """Every derived field of the tasks that (still) exist."""
    found = await conn.execute(_EXISTING, {"task_ids": task_ids})
    existing = [r.id for r in found]
    truth = await task_pending_actions(conn, Scope.tasks(task_ids))
    owners = await _session_owners(conn, existing)
    wanted: dict[str, Fields] = {}
    for task_id in existing:
        action = truth[task_id].value if task_id in truth else None
        primary, state = owners.get(task_id, (None, None))
        wanted[task_id] = (
            ("pending_action", action),
            ("primary_session_id", primary),
            ("session_state", state),
        )
    return wanted


async def _session_owners(
    conn: AsyncConnection, task_ids: list[str]
) -> dict[str, tuple[str | None, str | None]]:
    """Per task: its primary session's id, and the state of that session (or, without a
    primary session, of its newest one)."""
    owners: dict[str, tuple[str | None, str | None]] = {}
    for chunk in _chunks(task_ids):
        rows = await conn.execute(_SESSION_OWNERS, {"task_ids": chunk})
        for row in rows:
            if row.task_id not in owners:
                owners[row.task_id] = (row.id if row.is_primary else None, row.state)
    return owners


def _chunks(items: list[T]) -> Iterable[list[T]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]
