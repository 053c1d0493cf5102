"""Session pending-action projections stamped with a revision."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql.elements import ColumnElement

from backend.authority import SessionAuthority, session_authority
from backend.db.engine import read_tx
from backend.projections.revision import ProjectionRevision, RevisionClock


@dataclass(frozen=True, slots=True)
class SessionProjection:
    revision: ProjectionRevision
    sessions: list[SessionAuthority]


async def project_sessions(
    engine: AsyncEngine, clock: RevisionClock, sessions_where: ColumnElement[bool]
) -> SessionProjection:
    revision = clock.reserve()
    async with read_tx(engine) as conn:
        sessions = await session_authority(conn, sessions_where)
    return SessionProjection(revision=revision, sessions=sessions)
