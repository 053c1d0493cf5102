"""Semantic event publication: the one place that shapes message events and their projection.

``session.message.added/updated/deleted`` carry the session's authoritative ``pending_action``
and its ``pending_action_revision`` after mutations that can change it, so a client that cached
an explicit clean projection learns about a new current-turn question in the same event that
brings the question (S05). The revision is reserved before the projection read, from the same
clock as REST task-session snapshots, so REST and events share one order (S06). When the
projection cannot be computed the fields are omitted (clients keep their prior value), never
guessed; replaceable content-only updates omit them too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.authority import Scope
from backend.events.bus import Event, EventBus
from backend.projections.revision import RevisionClock
from backend.projections.sessions import project_sessions
from backend.views import message_view

log = logging.getLogger(__name__)

MESSAGE_EVENTS = frozenset(
    {"session.message.added", "session.message.updated", "session.message.deleted"}
)


class EventPublisher:
    def __init__(
        self, engine: AsyncEngine, bus: EventBus, clock: Callable[[], RevisionClock]
    ) -> None:
        self.engine = engine
        self.bus = bus
        self._clock = clock

    async def publish(self, event: Event) -> None:
        """Hand ``event`` to the bus; raising means the bus did not accept it."""
        await self.bus.publish(event)

    async def message(
        self, event_type: str, row: dict[str, Any], *, projection: bool = True
    ) -> None:
        """Publish a message event for ``row`` (already committed).

        Raises when the bus refuses the event (fault point ``events.message``), so callers
        that must report convergence failures can; the projection itself never raises.
        """
        assert event_type in MESSAGE_EVENTS, event_type
        data: dict[str, Any] = {
            "session_id": row["session_id"],
            "task_id": row["task_id"],
            "message": message_view(row),
        }
        if projection:
            data.update(await self._projection(row["session_id"]))
        await failpoints.hit("events.message")
        await self.bus.publish(Event(event_type, data))

    async def session_updated(self, session_id: str, task_id: str) -> None:
        """``session.updated`` with the session's revisioned ``pending_action`` (omitted when
        the projection fails), so a state change alone — e.g. entering a terminal state whose
        expiry could not run — still moves every client's projection forward."""
        data: dict[str, Any] = {"session_id": session_id, "task_id": task_id}
        data.update(await self._projection(session_id))
        await self.bus.publish(Event("session.updated", data))

    async def _projection(self, session_id: str) -> dict[str, Any]:
        """``pending_action`` + revision, or nothing when the projection failed."""
        try:
            await failpoints.hit("events.projection")
            result = await project_sessions(self.engine, self._clock(), Scope.session(session_id))
        except Exception as error:
            log.warning("projection of session %s failed; omitted: %r", session_id, error)
            return {}
        if not result.sessions:
            return {}  # the session is gone: nothing authoritative to say
        action = result.pending_actions().get(session_id)
        return {
            "pending_action": action.value if action is not None else None,
            "pending_action_revision": result.revision.to_json(),
        }
