"""Session pending-action projections stamped with a revision.

The one place a revision is reserved for a read of sessions' pending actions, REST lists and
events alike: the revision is reserved *before* the read, so a result that took long to arrive
is older than any projection reserved while it was on its way and clients can drop it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import SessionAuthority, Where, as_clause, session_authority
from backend.db.engine import read_tx
from backend.db.tables import sessions as sessions_table
from backend.projections.revision import ProjectionRevision, RevisionClock
from backend.vocabulary import PendingAction


@dataclass(frozen=True, slots=True)
class SessionProjection:
    revision: ProjectionRevision
    sessions: list[SessionAuthority]
    #: The session rows themselves, oldest first, from the same snapshot (when asked for).
    rows: list[Row[Any]] = field(default_factory=list)

    def pending_actions(self) -> dict[str, PendingAction | None]:
        """Each projected session's pending action, by session id."""
        return {a.session_id: a.pending_action for a in self.sessions}


async def project_sessions(
    engine: AsyncEngine,
    clock: RevisionClock,
    sessions_where: Where,
    *,
    revision: ProjectionRevision | None = None,
    with_rows: bool = False,
) -> SessionProjection:
    """Project the sessions ``sessions_where`` selects, under ``revision`` (reserved here when
    the caller has not reserved one earlier); ``with_rows`` adds their rows for full views."""
    revision = revision or await clock.reserve()
    async with read_tx(engine) as conn:
        authority = await session_authority(conn, sessions_where)
        rows: list[Row[Any]] = []
        if with_rows:
            query = select(sessions_table).where(as_clause(sessions_where))
            ordered = query.order_by(sessions_table.c.created_at, sessions_table.c.id)
            rows = list((await conn.execute(ordered)).all())
    return SessionProjection(revision=revision, sessions=authority, rows=rows)
