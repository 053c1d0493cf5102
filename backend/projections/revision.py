"""``pending_action_revision``: ``(epoch, sequence)`` ordering for every projection result.

The epoch is allocated from the database at each backend start by one atomic
``UPDATE ... RETURNING``, so it only grows, across restarts and across processes starting
together. The sequence orders reads within one epoch and is reserved *before* the database read
it labels: a result can then never carry a newer revision than a read that started after it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Self

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.engine import write_tx
from backend.db.tables import meta
from backend.models import MetaKey


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
    """Hands out revisions for one backend generation (one epoch)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self._sequence = itertools.count(1)

    @classmethod
    async def start(cls, engine: AsyncEngine) -> Self:
        return cls(await allocate_epoch(engine))

    def reserve(self) -> ProjectionRevision:
        """Call before the read whose result the revision will label."""
        return ProjectionRevision(self.epoch, next(self._sequence))
