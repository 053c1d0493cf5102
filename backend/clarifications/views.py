"""The active clarification bundles of a session, in the API contract's Bundle shape.

One function for ``GET /task-sessions/{id}/clarifications`` and the Reflex chat overlay, so the
overlay shows exactly what the route returns: only bundles the repository rule calls active,
with their still-pending questions.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import LiveWaiters, active_bundles
from backend.db.engine import read_tx
from backend.db.tables import messages
from backend.request_evidence import pending_id
from backend.vocabulary import MessageType, PendingAction
from backend.workers import other_live_workers

#: A bundle's ``kind``: the pending action it stands for.
_KINDS = {
    MessageType.CLARIFICATION_REQUEST.value: PendingAction.CLARIFICATION.value,
    MessageType.PERMISSION_REQUEST.value: PendingAction.PERMISSION.value,
}


def _position(meta: Any) -> int:
    raw = meta.get("position") if isinstance(meta, dict) else None
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else 0


async def active_bundle_views(
    engine: AsyncEngine,
    waiters: LiveWaiters,
    session_id: str,
    *,
    clarifications_only: bool = False,
) -> list[dict[str, Any]]:
    """``[{pending_id, session_id, turn_id, state, kind, questions: [...]}]`` for
    ``session_id``.

    The caller checks visibility first; this reads only. ``state`` is ``active_live`` while
    a waiter holds the bundle (this process's, or a live worker's that the bundle names),
    ``active_detached`` otherwise.

    The repository rule also calls a current-turn pending *permission* request active: it is
    listed too, with ``kind`` ``permission`` (one question: the request's title and options;
    answered through ``/permission/{id}/respond``), unless the caller asks
    ``clarifications_only``.
    """
    async with read_tx(engine) as conn:
        bundles = await active_bundles(conn, session_id)
        if clarifications_only:
            bundles = [
                b for b in bundles if b.request_type == MessageType.CLARIFICATION_REQUEST.value
            ]
        ids = [b.pending_id for b in bundles]
        elsewhere = await other_live_workers(conn, [b.live_worker for b in bundles])
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
                "multi_select": meta.get("multi_select") is True,
                "_position": _position(meta),
            }
        )
    for rows_of_bundle in questions.values():
        # The agent's order: rows of one bundle share ``created_at`` and their random-suffixed
        # ids do not keep the order they were asked in; ``position`` does (stable sort).
        rows_of_bundle.sort(key=lambda q: q.pop("_position"))
    return [
        {
            "pending_id": b.pending_id,
            "session_id": b.session_id,
            "turn_id": b.turn_id,
            "state": "active_live"
            if waiters.has_waiter(b.pending_id) or b.live_worker in elsewhere
            else "active_detached",
            "kind": _KINDS.get(b.request_type, b.request_type),
            "questions": questions[b.pending_id],
        }
        for b in bundles
    ]
