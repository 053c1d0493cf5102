"""The permission desk: agents' permission requests, answerable by the user.

The runtime's one object for them (``Runtime.permissions``): the agent's side (``ask``, the
live waiters, ``close`` at shutdown: :class:`backend.permissions.live.LivePermissions`) with
the user's side (``respond``: :mod:`backend.permissions.respond`) on the same registry of
waiters, which is separate from the clarification waiters so neither path can resolve the
other's.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from backend.clarifications.handover import RemoteWaiters
from backend.clarifications.waiters import WaiterRegistry
from backend.events.publisher import EventPublisher
from backend.permissions.announce import Announcer
from backend.permissions.live import RECHECK_S, LivePermissions
from backend.permissions.respond import CONFIRM_WAIT_S, PermissionResponder
from backend.projections.summaries import TaskSummaries


class PermissionDesk(LivePermissions):
    def __init__(
        self,
        engine: AsyncEngine,
        events: EventPublisher,
        summaries: TaskSummaries,
        *,
        recheck_s: float = RECHECK_S,
        confirm_wait_s: float = CONFIRM_WAIT_S,
    ) -> None:
        announcer = Announcer(events, summaries)
        #: ``waiters.has_waiter`` is what makes a request ``active_live`` for the rule.
        super().__init__(engine, announcer, WaiterRegistry(), recheck_s=recheck_s)
        #: Hand-overs to and from other workers (started by the runtime on NATS only).
        self.remote = RemoteWaiters(self.waiters, "permission", confirm_wait_s)
        self._responder = PermissionResponder(
            engine, announcer, self.waiters, confirm_wait_s=confirm_wait_s, remote=self.remote
        )

    async def respond(self, pending_id: str, option_id: str) -> str:
        """The user's choice for a visible request (the caller checked visibility)."""
        return await self._responder.respond(pending_id, option_id)
