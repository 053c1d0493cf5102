"""``pending_action_revision``: ``(epoch, sequence)`` ordering for every projection result.

A revision is reserved *before* the database read it labels, so a result can never carry a
newer revision than a read that started after it; clients keep the newest and drop the rest.

- One process per database (SQLite, the embedded default): the epoch is allocated at each start
  by one atomic ``UPDATE ... RETURNING`` (it only grows, across restarts and processes starting
  together) and the sequence counts in memory (:class:`LocalRevisionClock`).
- PostgreSQL, where several workers may serve one database: every worker uses the database's
  one epoch and takes each sequence from the database sequence ``projection_revision_seq``
  (:class:`SharedRevisionClock`), so revisions from any worker compare in the order their reads
  started. Per-worker epochs would not do: a client would discard every event of a worker
  whose epoch is lower than one it has seen, however new.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Self

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.engine import write_tx
from backend.db.meta import meta_row
from backend.db.tables import meta
from backend.models import MetaKey

#: The PostgreSQL sequence shared clocks take sequences from (migration 0005).
SEQUENCE = "projection_revision_seq"


class DatabaseNotMigratedError(RuntimeError):
    """The meta row is missing: the schema was not created by ``backend.cli migrate``."""


@dataclass(frozen=True, order=True, slots=True)
class ProjectionRevision:
    epoch: int
    sequence: int

    def to_json(self) -> dict[str, str | int]:
        # The epoch is a decimal string so JavaScript clients never lose precision.
        return {"epoch": str(self.epoch), "sequence": self.sequence}

    @classmethod
    def from_json(cls, data: dict[str, str | int]) -> Self:
        return cls(epoch=int(data["epoch"]), sequence=int(data["sequence"]))


async def allocate_epoch(engine: AsyncEngine) -> int:
    stmt = (
        update(meta)
        .where(meta.c.key == MetaKey.PROJECTION_EPOCH.value)
        .values(int_value=meta.c.int_value + 1)
        .returning(meta.c.int_value)
    )
    async with write_tx(engine) as conn:
        epoch = (await conn.execute(stmt)).scalar_one_or_none()
    if epoch is None:
        raise DatabaseNotMigratedError("projection epoch row missing; run the migrations first")
    return int(epoch)


class RevisionClock:
    """Hands out the revisions of one backend process."""

    def __init__(self, epoch: int) -> None:
        #: The epoch the boot snapshot tells clients (their floor).
        self.epoch = epoch

    async def reserve(self) -> ProjectionRevision:  # pragma: no cover - interface
        """Call before the read whose result the revision will label."""
        raise NotImplementedError


class LocalRevisionClock(RevisionClock):
    """A new epoch per start and an in-memory sequence: one process per database."""

    def __init__(self, epoch: int) -> None:
        super().__init__(epoch)
        self._sequence = itertools.count(1)

    async def reserve(self) -> ProjectionRevision:
        return ProjectionRevision(self.epoch, next(self._sequence))


class SharedRevisionClock(RevisionClock):
    """The database's epoch and sequence: one order for every worker of a database."""

    def __init__(self, engine: AsyncEngine, epoch: int) -> None:
        super().__init__(epoch)
        self._engine = engine

    async def reserve(self) -> ProjectionRevision:
        async with self._engine.connect() as conn:
            sequence = (await conn.execute(select(func.nextval(SEQUENCE)))).scalar_one()
        return ProjectionRevision(self.epoch, int(sequence))


async def start_clock(engine: AsyncEngine) -> RevisionClock:
    """The clock for this process: shared on PostgreSQL, local otherwise."""
    if engine.dialect.name == "postgresql":
        return SharedRevisionClock(engine, await current_epoch(engine))
    return LocalRevisionClock(await allocate_epoch(engine))


async def current_epoch(engine: AsyncEngine) -> int:
    """The database's epoch as it stands (the shared clock never moves it)."""
    row = await meta_row(engine, MetaKey.PROJECTION_EPOCH)
    if row is None:
        raise DatabaseNotMigratedError("projection epoch row missing; run the migrations first")
    return row[0]
