"""Detached resume: dispatch an answer as a successor prompt, at most once, on every exit.

The successor is reserved (unpublished), marked attempted, dispatched, then published. What
each exit leaves in the database (docs/reliability.md lists them all):

- refused before the reservation (busy, terminal, stale): nothing was written;
- any exit before the dispatch call — an error, a cancelled caller, a failed attempt mark:
  the reservation is rolled back in a fresh bounded context (the session goes back to the
  generation and state it displaced); if even that fails it stays for start-up recovery and
  ready handling keeps waiting for it (S29);
- the dispatch call itself is never cut in half: it runs shielded, bounded by the executor's
  acknowledgement deadline, so its outcome is known before a cancellation is honoured;
- refused or unacknowledged: rolled back as above;
- accepted but failed (transport, publication, anything unexpected): the successor stays (the
  agent may have the answer); its start event is published or left in the start-event outbox
  for start-up replay; a transport failure also completes it as ``failed``.

The :class:`DispatchTicket` tells the caller which of these happened, whatever it caught, so
the answer's claim is restored only when the answer certainly never left.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.clarifications.claims import Released
from backend.db.bounded import bounded
from backend.db.engine import write_tx
from backend.errors import DomainError
from backend.events import Event
from backend.events.publisher import EventPublisher
from backend.orchestrator import reservations
from backend.orchestrator.admission import AdmittedTurn, admit_prompt
from backend.orchestrator.dispatch import (
    AgentChannel,
    PromptDispatcher,
    PromptNotAcknowledged,
    PromptRejected,
    turn_data,
)
from backend.orchestrator.expectation import AnswerExpectation

log = logging.getLogger(__name__)


class ResumeNotAccepted(Exception):
    """The agent certainly did not take the detached answer; it may be restored and retried."""


class ResumeAmbiguous(Exception):
    """The agent may have taken the detached answer; it must never be dispatched again."""


class Phase(enum.Enum):
    NOT_RESERVED = "not_reserved"
    RESERVED = "reserved"
    ROLLED_BACK = "rolled_back"
    #: The rollback failed: the reservation stays until start-up recovery reconciles it.
    UNRESOLVED = "unresolved"
    DISPATCHING = "dispatching"
    ACCEPTED = "accepted"
    PUBLISHED = "published"


@dataclass(slots=True)
class DispatchTicket:
    """Where a resume got to; updated inside shielded work, so it is true even for a caller
    that was cancelled."""

    phase: Phase = Phase.NOT_RESERVED
    turn_id: str | None = None
    #: The claim the rollback released in its own transaction (``ROLLED_BACK`` only).
    released: Released | None = None

    @property
    def never_sent(self) -> bool:
        """The answer certainly did not reach the agent and nothing of it is left reserved."""
        return self.phase in (Phase.NOT_RESERVED, Phase.ROLLED_BACK)

    @property
    def may_have_been_sent(self) -> bool:
        return self.phase in (Phase.DISPATCHING, Phase.ACCEPTED, Phase.PUBLISHED)


TurnCompleter = Callable[[str, str, int, str], Awaitable[bool]]


class DetachedResume:
    def __init__(
        self,
        engine: AsyncEngine,
        dispatcher: PromptDispatcher,
        events: EventPublisher,
        channel: AgentChannel,
        complete_turn: TurnCompleter,
        dispatch_bound_s: float,
    ) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.events = events
        self.channel = channel
        self.complete_turn = complete_turn
        self.dispatch_bound_s = dispatch_bound_s
        #: Reservations of this process not yet resolved, by turn id: ready handling wakes up
        #: on them instead of polling (the database stays the judge of "resolved").
        self._resolved: dict[str, asyncio.Event] = {}

    def resolution_of(self, turn_id: str) -> asyncio.Event | None:
        return self._resolved.get(turn_id)

    async def run(
        self,
        session_id: str,
        source_turn_id: str | None,
        bundle_id: str,
        claimed_ids: list[str],
        answer: dict[str, Any],
        expect: AnswerExpectation | None = None,
        ticket: DispatchTicket | None = None,
    ) -> str:
        """Dispatch ``answer`` once as a successor turn of ``session_id``; returns its id.

        Raises a :class:`DomainError` when admission refuses (nothing written),
        :class:`ResumeNotAccepted` when the agent certainly did not take it (rolled back),
        :class:`ResumeAmbiguous` when it may have (or the rollback failed); a cancelled caller
        gets its ``CancelledError`` once the state is settled. ``ticket`` says which.
        """
        ticket = ticket if ticket is not None else DispatchTicket()
        metadata = reservations.reservation_metadata(source_turn_id, bundle_id, claimed_ids)
        try:
            admitted = await bounded(
                self._reserve(session_id, metadata, expect),
                undo=lambda turn: self._roll_back(turn, ticket),
            )
        except DomainError:
            raise
        except Exception as error:
            raise ResumeNotAccepted("the successor could not be reserved") from error
        ticket.phase, ticket.turn_id = Phase.RESERVED, admitted.turn_id
        self._resolved[admitted.turn_id] = asyncio.Event()
        try:
            await failpoints.hit("resume.after_reserve")
            await failpoints.hit("resume.attempt_mark")
            if not await bounded(self._mark_attempted(admitted)):
                raise RuntimeError("the reservation vanished before the attempt mark")
            await failpoints.hit("resume.after_attempt_mark")
        except BaseException as error:
            await self._roll_back(admitted, ticket)
            if not isinstance(error, Exception):
                raise
            raise self._not_sent(ticket, "could not mark the dispatch attempt") from error
        return await bounded(self._dispatch(admitted, answer, ticket), self.dispatch_bound_s)

    async def _reserve(
        self, session_id: str, metadata: dict[str, Any], expect: AnswerExpectation | None
    ) -> AdmittedTurn:
        async with write_tx(self.engine) as conn:
            return await admit_prompt(conn, session_id, turn_metadata=metadata, expect=expect)

    async def _mark_attempted(self, admitted: AdmittedTurn) -> bool:
        async with write_tx(self.engine) as conn:
            return await reservations.mark_attempted(conn, admitted.turn_id)

    async def _dispatch(
        self, admitted: AdmittedTurn, answer: dict[str, Any], ticket: DispatchTicket
    ) -> str:
        """Runs shielded: the dispatch call and the settling of its outcome are one unit."""
        request = self.channel.prompt(admitted, "(answer to the agent's question)", answer)
        ticket.phase = Phase.DISPATCHING
        try:
            await self.dispatcher.dispatch_prompt(request)
        except (PromptRejected, PromptNotAcknowledged) as error:
            # Refused, or not acknowledged within the bounded wait: acceptance failed (S34).
            await self._roll_back(admitted, ticket)
            raise self._not_sent(ticket, str(error)) from error
        except BaseException as error:
            # Accepted, then the transport failed (or anything unexpected): the agent may have
            # the answer. Normal failure cleanup; the successor and the answer stay (S18).
            ticket.phase = Phase.ACCEPTED
            await self._settle_accepted(admitted, ticket)
            try:
                await self.complete_turn(
                    admitted.session_id, admitted.turn_id, admitted.prompt_generation, "failed"
                )
            except Exception as cleanup:
                log.error("failed turn %s not completed: %r", admitted.turn_id, cleanup)
            if not isinstance(error, Exception):
                raise
            raise ResumeAmbiguous(str(error)) from error
        ticket.phase = Phase.ACCEPTED
        try:
            await failpoints.hit("resume.before_publish")
        except Exception as error:
            await self._settle_accepted(admitted, ticket, publish=False)
            raise ResumeAmbiguous("the agent accepted the answer; publication failed") from error
        if not await self._settle_accepted(admitted, ticket):
            raise ResumeAmbiguous("the agent accepted the answer; publication failed")
        return admitted.turn_id

    async def _settle_accepted(
        self, admitted: AdmittedTurn, ticket: DispatchTicket, *, publish: bool = True
    ) -> bool:
        """Publish the accepted successor: ``turn.started`` (recovery-clean payload), then
        clear its private keys. When that fails the successor goes to the start-event outbox
        (replayed at start-up) — either way it is resolved, so ready handling stops waiting.
        True when published."""
        try:
            if not publish:
                raise RuntimeError("publication skipped")
            await failpoints.hit("events.publish")
            await self.events.publish(Event("turn.started", turn_data(admitted)))
            await failpoints.hit("resume.before_clear")
            async with write_tx(self.engine) as conn:
                await reservations.publish(conn, admitted.turn_id)
            ticket.phase = Phase.PUBLISHED
            return True
        except Exception as error:
            log.error("successor %s not published: %r", admitted.turn_id, error)

            async def outbox() -> bool:
                async with write_tx(self.engine) as conn:
                    return await reservations.to_outbox(conn, admitted.turn_id)

            try:
                await bounded(outbox())
            except Exception as outbox_error:
                # Still reserved and attempted: authoritative, and reconciled at start-up.
                log.error("successor %s left reserved: %r", admitted.turn_id, outbox_error)
                return False
            return False
        finally:
            self._resolve(admitted.turn_id, ticket)

    async def _roll_back(self, admitted: AdmittedTurn, ticket: DispatchTicket) -> None:
        """Undo a reservation the agent certainly did not take, in a fresh bounded context
        (even for a cancelled caller). If that cannot be proven done the reservation stays:
        the session remains claimed, ready handling waits for it and prompts are refused as
        busy until start-up recovery reconciles it (S29)."""

        async def work() -> None:
            await failpoints.hit("resume.rollback")
            async with write_tx(self.engine) as conn:
                released = await reservations.roll_back(
                    conn, admitted.session_id, admitted.turn_id, admitted.prompt_generation
                )
            ticket.released = released
            ticket.phase = Phase.ROLLED_BACK if released is not None else Phase.UNRESOLVED
            self._resolve(admitted.turn_id, ticket)

        try:
            await bounded(work())
        except Exception as error:  # a cancelled caller re-raises after the work finished
            log.error("rollback of reservation %s failed: %r", admitted.turn_id, error)
            ticket.phase = Phase.UNRESOLVED

    def _resolve(self, turn_id: str, ticket: DispatchTicket) -> None:
        if ticket.phase is Phase.UNRESOLVED:
            return
        event = self._resolved.pop(turn_id, None)
        if event is not None:
            event.set()

    @staticmethod
    def _not_sent(ticket: DispatchTicket, reason: str) -> Exception:
        if ticket.phase is Phase.ROLLED_BACK:
            return ResumeNotAccepted(reason)
        return ResumeAmbiguous(f"{reason}; the reservation could not be rolled back")
