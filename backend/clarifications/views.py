"""The active clarification bundles of a session, in the API contract's Bundle shape.

One function for ``GET /task-sessions/{id}/clarifications`` and the Reflex chat overlay, so the
overlay shows exactly what the route returns: only bundles the repository rule calls active,
with their still-pending questions.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import active_bundles
from backend.authority.sql import messages
from backend.clarifications.waiters import WaiterRegistry
from backend.db.engine import read_tx
from backend.request_evidence import pending_id


async def active_bundle_views(
    engine: AsyncEngine, waiters: WaiterRegistry, session_id: str
) -> list[dict[str, Any]]:
    """``[{pending_id, session_id, turn_id, state, questions: [...]}]`` for ``session_id``.

    The caller checks visibility first; this reads only. ``state`` is ``active_live`` while
    this process holds a waiter for the bundle, ``active_detached`` otherwise.
    """
    async with read_tx(engine) as conn:
        bundles = await active_bundles(conn, session_id)
        ids = [b.pending_id for b in bundles]
        rows = (
            await conn.execute(
                select(messages)
                .where(messages.c.session_id == session_id, pending_id(messages).in_(ids))
                .order_by(messages.c.created_at, messages.c.id)
            )
        ).all()
    questions: dict[str, list[dict[str, Any]]] = {pid: [] for pid in ids}
    for row in rows:
        meta = row.metadata
        if meta.get("status", "pending") != "pending":
            continue
        questions[meta["pending_id"]].append(
            {
                "message_id": row.id,
                "question": meta.get("question", row.content),
                "options": meta.get("options", []),
            }
        )
    return [
        {
            "pending_id": b.pending_id,
            "session_id": b.session_id,
            "turn_id": b.turn_id,
            "state": "active_live" if waiters.has_waiter(b.pending_id) else "active_detached",
            "questions": questions[b.pending_id],
        }
        for b in bundles
    ]
