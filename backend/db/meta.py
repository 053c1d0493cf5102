"""Reads of ``kandev_meta``: per-database values the migrations store and every start reads
(the projection epoch, the agent credential key, the instance id)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.engine import read_tx
from backend.db.tables import meta
from backend.vocabulary import MetaKey


async def meta_row(engine: AsyncEngine, key: MetaKey) -> tuple[int, str | None] | None:
    """``(int_value, text_value)`` of ``key``, or ``None`` when the row is missing (the
    database was not migrated). Each caller says what a missing value means for it."""
    async with read_tx(engine) as conn:
        row = (
            await conn.execute(
                select(meta.c.int_value, meta.c.text_value).where(meta.c.key == key.value)
            )
        ).first()
    return None if row is None else (int(row.int_value), row.text_value)
