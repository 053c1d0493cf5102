"""Turn completion: the agent's ready event, a pause, a failed start.

A ready event first waits for any overlapping successor reservation to resolve, then applies
only while its generation still owns the session (S28); a stale one closes its own turn as
history and runs no completion action against a newer or reserved turn. See
docs/architecture.md (*Clarification lifecycle as built*).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend import failpoints
from backend.authority import Scope, session_authority
from backend.clarifications import claims
from backend.clarifications.store import detach
from backend.clarifications.waiters import WaiterRegistry
from backend.clock import utcnow
from backend.db.bounded import bounded
from backend.db.engine import write_tx
from backend.db.json import json_merge, patch_param
from backend.db.tables import sessions, turns
from backend.errors import ReservationUnresolved
from backend.events import Event
from backend.events.publisher import EventPublisher
from backend.orchestrator import reservations
from backend.orchestrator.admission import set_state_for_generation
from backend.orchestrator.reservations import COMPLETION_STATUS
from backend.vocabulary import PendingAction, SessionState
from backend.workflow import ClarificationPending, GuardUnavailable, advance_on_turn_complete

log = logging.getLogger(__name__)

#: How often ready handling re-reads an unresolved reservation of another process.
RESERVATION_POLL_S = 0.05

#: The ready event's reads and close, built once (they run on every turn's end).
_OWNER_GENERATION = select(sessions.c.prompt_generation).where(
    sessions.c.id == bindparam("session")
)
_CLOSE_TURN = (
    update(turns)
    .where(
        turns.c.id == bindparam("turn"),
        turns.c.session_id == bindparam("session"),
        turns.c.prompt_generation == bindparam("generation"),
        turns.c.completed_at.is_(None),
    )
    .values(
        completed_at=bindparam("now"), metadata=json_merge(turns.c.metadata, patch_param("how"))
    )
    .returning(turns.c.task_id)
)


@dataclass(frozen=True, slots=True)
class ClosedTurn:
    task_id: str
    #: The event's generation still owns the session: completion actions may run.
    owns_session: bool
    #: The questions the agent no longer waits for, detached with the close (to announce).
    detached: list[dict[str, Any]] = field(default_factory=list)
    #: The session's state changed with the close (to announce).
    state_changed: bool = False


class TurnCompletion:
    """Closes turns and runs their completion actions (detach pass, session state, events,
    workflow transition)."""

    def __init__(
        self,
        engine: AsyncEngine,
        events: EventPublisher,
        waiters: WaiterRegistry,
        *,
        on_activity: Callable[[str], None],
        resolution_of: Callable[[str], asyncio.Event | None],
        reservation_wait_s: float,
    ) -> None:
        self.engine = engine
        self.events = events
        self.waiters = waiters
        #: The agent is alive in a session (cancels the primary-answer watchdog).
        self.on_activity = on_activity
        #: This process's resolution event of a reservation, if it owns one.
        self.resolution_of = resolution_of
        #: How long a ready event waits for an overlapping reservation to resolve.
        self.reservation_wait_s = reservation_wait_s

    async def turn_complete(
        self, session_id: str, turn_id: str, generation: int, status: str
    ) -> bool:
        """The ready event; ``True`` when it applied (its generation owned the session)."""
        closed = await self._close_turn(session_id, turn_id, generation, status)
        if closed is None or not closed.owns_session:
            return False
        self.on_activity(session_id)
        # Committed: the turn's prompt ended, so did its tool calls (no await since the
        # commit, so no responder found a waiter of the closed turn meanwhile).
        for waiter in self.waiters.of_session(session_id):
            if waiter.turn_id == turn_id:
                self.waiters.drop(waiter.pending_id)
        for row in closed.detached:
            await self.events.message("session.message.updated", row)
        ids = {"session_id": session_id, "task_id": closed.task_id}
        if closed.state_changed:
            await self.events.publish(Event("session.updated", ids))
        await self.events.publish(
            Event("turn.completed", {**ids, "turn_id": turn_id, "status": status})
        )
        if status == "completed":
            await self._advance_workflow(closed.task_id)
        return True

    async def detach_and_publish(
        self, session_id: str, *, bundle_id: str | None = None, turn_id: str | None = None
    ) -> None:
        """Detach a bundle (or a turn's bundles) once, and announce exactly the rows detached."""

        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                return await detach(conn, session_id, bundle_id=bundle_id, turn_id=turn_id)

        for row in await bounded(work()):
            await self.events.message("session.message.updated", row)

    async def _close_turn(
        self, session_id: str, turn_id: str, generation: int, status: str
    ) -> ClosedTurn | None:
        """Close the named turn once no other reservation of the session is unresolved.

        The check, the close and (while its generation owns the session) the teardown are one
        transaction holding the session lock, so a reservation admitted afterwards is seen by
        the generation check instead, and every exit leaves the turn either open as it was or
        closed with its teardown done. ``None``: no such open turn at that generation (a
        duplicate or unknown event)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reservation_wait_s
        while True:
            async with write_tx(self.engine) as conn:
                await claims.lock_session(conn, session_id)
                blocking = await reservations.unresolved(conn, session_id, other_than=turn_id)
                if blocking is None:
                    owner = (
                        await conn.execute(_OWNER_GENERATION, {"session": session_id})
                    ).scalar_one_or_none()
                    params = {
                        "turn": turn_id,
                        "session": session_id,
                        "generation": generation,
                        "now": utcnow(),
                        "how": {COMPLETION_STATUS: status},
                    }
                    closed = (await conn.execute(_CLOSE_TURN, params)).first()
                    if closed is None:
                        return None
                    if owner != generation:
                        return ClosedTurn(closed.task_id, owns_session=False)
                    return await self._tear_down(conn, session_id, turn_id, generation, closed)
            await failpoints.hit("ready.awaits_reservation")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ReservationUnresolved(
                    "a successor reservation of this session has not resolved; retry later"
                )
            resolution = self.resolution_of(blocking)
            if resolution is None:  # another process's reservation: poll the database
                await asyncio.sleep(min(RESERVATION_POLL_S, remaining))
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(resolution.wait(), remaining)

    async def _tear_down(
        self, conn: AsyncConnection, session_id: str, turn_id: str, generation: int, closed: Any
    ) -> ClosedTurn:
        """In the close's transaction: detach what the agent no longer waits for (a no-op
        when it answered everything) and set the session waiting for input or idle."""
        detached = await detach(conn, session_id, turn_id=turn_id)
        (authority,) = await session_authority(conn, Scope.session(session_id))
        waiting = authority.pending_action is PendingAction.CLARIFICATION
        next_state = SessionState.WAITING_FOR_INPUT if waiting else SessionState.IDLE
        changed = await set_state_for_generation(conn, session_id, generation, next_state)
        return ClosedTurn(closed.task_id, True, detached, changed)

    async def _advance_workflow(self, task_id: str) -> None:
        """The on-turn-complete workflow transition, behind the workflow guard: an active
        question keeps the task in its step, and so does an unreadable guard (fail closed)."""
        try:
            async with write_tx(self.engine) as conn:
                moved = await advance_on_turn_complete(conn, task_id)
        except ClarificationPending:
            return
        except GuardUnavailable as error:
            log.warning("task %s not advanced: %s", task_id, error.message)
            return
        if moved is not None and moved.moved:
            await self.events.publish(
                Event("task.updated", {"task_id": task_id, "workspace_id": moved.workspace_id})
            )
