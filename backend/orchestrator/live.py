"""The live path of a question: the agent's clarification request is held open as the live
waiter, a response is confirmed durably before the agent hears it, and a wait that ends
without an outcome detaches the bundle and pauses exactly the turn that asked.

The waiter is only a delivery channel; the database decides what is active. See
docs/architecture.md (*Clarification lifecycle as built*) and docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.clarifications import claims
from backend.clarifications.store import Question, create_bundle
from backend.clarifications.waiters import LiveWaiter, WaiterOutcome, WaiterRegistry
from backend.clock import utcnow
from backend.db.bounded import BOUNDED_WRITE_S, bounded
from backend.db.engine import write_tx
from backend.errors import NotActive, NotFound
from backend.events.publisher import EventPublisher
from backend.orchestrator.admission import require_current, set_state_for_generation
from backend.orchestrator.completion import TurnCompletion
from backend.orchestrator.expectation import AnswerExpectation
from backend.orchestrator.watchdog import PrimaryAnswerWatchdog
from backend.vocabulary import SessionState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClarificationResult:
    """How the agent's wait ended: ``answered``/``rejected``/``expired`` carry the waiter's
    outcome; ``detached`` means the wait ended without one and the bundle stays answerable."""

    outcome: str
    pending_id: str
    answers: tuple[dict[str, Any], ...] = ()


class AgentGone(Exception):
    """The live waiter's agent went away before it could confirm the response."""


class LiveClarifications:
    """The agent's clarification requests held open in this process (its waiter store)."""

    def __init__(
        self,
        engine: AsyncEngine,
        events: EventPublisher,
        waiters: WaiterRegistry,
        completion: TurnCompletion,
        watchdog: PrimaryAnswerWatchdog,
    ) -> None:
        self.engine = engine
        self.events = events
        self.waiters = waiters
        self.completion = completion
        self.watchdog = watchdog

    @property
    def _pause_bound_s(self) -> float:
        """A pause may wait for an overlapping reservation, then writes once."""
        return self.completion.reservation_wait_s + BOUNDED_WRITE_S

    async def ask(
        self,
        session_id: str,
        turn_id: str,
        generation: int,
        questions: Sequence[Question],
        wait_seconds: float,
        agent_gone: Awaitable[Any],
    ) -> ClarificationResult:
        """Store the bundle, then hold the agent's request as the live waiter until an
        outcome arrives, ``wait_seconds`` pass, or the agent goes away (then detach)."""
        self.watchdog.on_activity(session_id)
        await failpoints.hit("clarification.before_store")  # the agent asks; nothing stored yet

        async def store() -> tuple[LiveWaiter, list[dict[str, Any]]]:
            """The bundle, the session waiting for input, and the waiter registered before
            the commit (see :meth:`WaiterRegistry.until_committed`)."""
            with self.waiters.until_committed() as hold:
                async with write_tx(self.engine) as conn:
                    admitted = await require_current(
                        conn, session_id, turn_id, generation, open_turn=True
                    )
                    bundle_id, rows = await create_bundle(
                        conn,
                        session_id=session_id,
                        task_id=admitted.task_id,
                        turn_id=turn_id,
                        questions=questions,
                    )
                    await set_state_for_generation(
                        conn, session_id, generation, SessionState.WAITING_FOR_INPUT
                    )
                    waiter = LiveWaiter(bundle_id, session_id, turn_id, generation)
                    hold(waiter)
                # Committed, answerable live already, not yet announced; a fault here is an
                # unknown commit outcome: the waiter goes, the question stays, detached.
                await failpoints.hit("clarification.after_store")
            return waiter, rows

        # Stored but the agent already gone: the question stays, detached (like a disconnect).
        waiter, rows = await bounded(
            store(),
            undo=lambda stored: self._abandon(stored[0]),
            undo_seconds=self._pause_bound_s + BOUNDED_WRITE_S,
        )
        bundle_id = waiter.pending_id
        gone = asyncio.ensure_future(agent_gone)
        try:
            await self._announce(bundle_id, rows)
            await asyncio.wait(
                {waiter.future, gone},
                timeout=max(wait_seconds, 0),
                return_when=asyncio.FIRST_COMPLETED,
            )
        except BaseException:
            # The server cancelled the request (the agent is gone): the question must stay,
            # detached, and an answer handed over meanwhile is released.
            await self._abandon(waiter)
            raise
        finally:
            gone.cancel()
        self.waiters.drop(bundle_id)
        if waiter.future.done():
            outcome = waiter.future.result()
            if outcome.intent_id is None:
                return ClarificationResult(outcome.outcome, bundle_id, outcome.answers)
            if await self._confirm_delivery(waiter, outcome):
                await failpoints.hit("waiter.after_confirm")  # e.g. the response gets lost
                return ClarificationResult(outcome.outcome, bundle_id, outcome.answers)
            # The responder gave up and restored the question: the agent must not see it.
            return ClarificationResult("detached", bundle_id)
        await self._detach_and_pause(waiter)
        return ClarificationResult("detached", bundle_id)

    async def cancel(self, bundle_id: str) -> None:
        """Cancel a request held by this process's waiter store (404 otherwise): its pending
        rows become ``cancelled`` and the waiting agent is told so. A response that already
        claimed the bundle wins: cancellation cannot preempt its delivery (409, S24)."""
        waiter = self.waiters.get(bundle_id)
        if waiter is None or not self.waiters.has_waiter(bundle_id):
            raise NotFound("no live clarification with that id here")

        async def work() -> tuple[list[dict[str, Any]], bool]:
            async with write_tx(self.engine) as conn:
                rows = await claims.cancel(conn, waiter.session_id, bundle_id)
                return rows, not rows and await claims.is_claimed(conn, bundle_id)

        rows, claimed = await bounded(work())
        if claimed:
            raise NotActive(
                "a response to this question is being delivered", state="delivery_claimed"
            )
        self.waiters.resolve(bundle_id, WaiterOutcome("cancelled"))
        for row in rows:
            await self.events.message("session.message.updated", row)

    async def _pause(self, waiter: LiveWaiter) -> None:
        """Complete exactly the turn that asked (its snapshotted generation)."""
        await bounded(
            self.completion.turn_complete(
                waiter.session_id, waiter.turn_id, waiter.prompt_generation, "paused"
            ),
            self._pause_bound_s,
        )

    async def _announce(self, bundle_id: str, rows: list[dict[str, Any]]) -> None:
        """``session.message.added`` for the stored question; a failure is logged (reads
        converge), a cancellation is not swallowed."""
        try:
            for row in rows:
                await self.events.message("session.message.added", row)
        except Exception as error:
            log.warning("question %s not published (reads converge): %r", bundle_id, error)

    async def _abandon(self, waiter: LiveWaiter) -> None:
        """The agent's request is gone: no wait, an answer handed over meanwhile is not taken
        (its responder releases it), and the question stays, detached."""
        self.waiters.drop(waiter.pending_id)
        if waiter.future.done():
            _fail_confirmation(waiter.future.result(), "the agent went away")
        await self._detach_and_pause(waiter)

    async def _detach_and_pause(self, waiter: LiveWaiter) -> None:
        """Detach the bundle, announce it, then pause (complete) exactly the turn that asked,
        as one shielded unit: it runs on exit paths, and a cancelled MCP request (an anyio
        cancel scope) cancels *every* await of its task, not just one, so each step awaited
        on its own would stop after the first.

        The waiter is the snapshot of turn authority taken when the question was asked, before
        detachment: a first or successor turn admitted meanwhile has a newer generation, so
        the pause's compare-and-set cannot complete it or change its session state.
        """
        await bounded(self._detach_then_pause(waiter), self._pause_bound_s + 2 * BOUNDED_WRITE_S)

    async def _detach_then_pause(self, waiter: LiveWaiter) -> None:
        await failpoints.hit("clarification.before_detach")
        await self.completion.detach_and_publish(waiter.session_id, bundle_id=waiter.pending_id)
        await failpoints.hit("clarification.before_pause")
        await self._pause(waiter)

    async def _confirm_delivery(self, waiter: LiveWaiter, outcome: WaiterOutcome) -> bool:
        """Durable confirmation before the agent gets the response. Once started it runs to
        the end (even if the responder stopped waiting, or the agent's request is cancelled),
        and it serializes against the responder's restore through the intent id: exactly one
        of them wins. A cancelled agent request still leaves the answer safe: the watchdog is
        armed inside the confirmation, and a confirmed Skip pauses the turn."""
        assert outcome.intent_id is not None and outcome.confirmation is not None
        intent_id, confirmation = outcome.intent_id, outcome.confirmation
        try:
            await failpoints.hit("waiter.before_confirm")
        except BaseException as error:
            _fail_confirmation(outcome, f"confirmation did not start: {error!r}")
            if not isinstance(error, Exception):
                await self._detach_and_pause(waiter)
            raise

        async def work() -> list[dict[str, Any]]:
            try:
                async with write_tx(self.engine) as conn:
                    rows = await claims.confirm_live(conn, waiter, intent_id)
            except BaseException as error:
                _fail_confirmation(outcome, f"confirmation failed: {error!r}")
                raise
            if not confirmation.done():
                confirmation.set_result(rows)
            if rows and outcome.outcome == "answered":
                expectation = AnswerExpectation(
                    waiter.session_id, waiter.turn_id, waiter.prompt_generation, utcnow()
                )
                self.watchdog.arm(expectation, waiter.pending_id, outcome.answers)
            return rows

        try:
            rows = await bounded(work())
        except asyncio.CancelledError:
            # Confirmed or not, the agent will not hear it. An answer is re-sent by the
            # watchdog; anything else ends the turn the agent left.
            if outcome.outcome != "answered" or not (confirmation.done() and confirmation.result()):
                await self._pause(waiter)
            raise
        return bool(rows)


def _fail_confirmation(outcome: WaiterOutcome, reason: str) -> None:
    """Tell a responder waiting on ``outcome`` at once that no confirmation is coming."""
    if outcome.confirmation is not None and not outcome.confirmation.done():
        outcome.confirmation.set_exception(AgentGone(reason))
