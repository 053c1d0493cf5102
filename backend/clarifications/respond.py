"""``POST /api/v1/clarification/{pending_id}/respond``: the state-based response contract.

1. Validate the body against the bundle's rows (400 writes nothing).
2. Claim, in one transaction that holds the session lock: classify the bundle with the rule;
   only an active bundle is claimed (409 otherwise, with its state, and no write). The claim
   stamps a durable delivery intent on exactly the pending rows.
3. Deliver: a live waiter confirms durably before the agent sees the response; a detached
   answer is dispatched once as a new prompt; a detached Skip is simply finalized.
4. Publish terminal message updates only after delivery succeeded. Restored rows are
   published too, and the task summary is refreshed synchronously before the retryable error
   is reported, so every client converges on what the database says (S39). If either step
   fails after the restore committed, the error says so but stays retryable: the durable
   pending state is authoritative and a retry is safe (S40).

Every exit (error, cancellation) releases or retires the claim: docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend import failpoints
from backend.authority import BundleFacts, BundleState, bundle_facts
from backend.clarifications import claims
from backend.clarifications.answers import (
    Answer,
    agent_answers,
    bundle_rows,
    check_answers,
    claim_patches,
)
from backend.clarifications.handover import ABSENT, CONFIRMED, RemoteWaiters
from backend.clarifications.waiters import WaiterOutcome, WaiterRegistry
from backend.db.bounded import BOUNDED_WRITE_S, bounded
from backend.db.engine import read_tx, write_tx
from backend.db.tables import messages
from backend.errors import (
    ConvergenceFailed,
    DeliveryFailed,
    DomainError,
    NotActive,
    NotFound,
    ServerBusy,
)
from backend.events.publisher import EventPublisher
from backend.ids import new_id
from backend.orchestrator.resume import DispatchTicket
from backend.orchestrator.service import Orchestrator
from backend.projections.summaries import TaskSummaries
from backend.vocabulary import MessageType, RequestStatus
from backend.workers import worker_id

log = logging.getLogger(__name__)

#: How long a responder waits for a live waiter's durable confirmation.
LIVE_CONFIRM_WAIT_S = 10.0


class Responder:
    def __init__(
        self,
        engine: AsyncEngine,
        waiters: WaiterRegistry,
        orchestrator: Orchestrator,
        events: EventPublisher,
        summaries: TaskSummaries,
        remote: RemoteWaiters | None = None,
    ) -> None:
        self.engine = engine
        self.waiters = waiters
        self.orchestrator = orchestrator
        self.events = events
        self.summaries = summaries
        #: Other workers' waiters (several workers on NATS); ``None`` in one process.
        self.remote = remote
        #: How long the claim may take before the response is refused as "busy" (503).
        self.claim_bound_s = BOUNDED_WRITE_S

    async def respond(
        self,
        pending_id: str,
        answers: list[Answer] | None,
        rejected: bool,
        reason: str | None,
        *,
        authorize: Callable[[AsyncConnection], Awaitable[None]] | None = None,
    ) -> str:
        """Returns the outcome: ``delivered``, ``resumed`` or ``rejected``. ``authorize``
        raises unless the caller may answer (a 404), read in the same transaction as the
        bundle, before anything is written."""
        async with read_tx(self.engine) as conn:
            if authorize is not None:
                await authorize(conn)
            facts = await bundle_facts(conn, pending_id)
            rows = await bundle_rows(conn, pending_id)
        if facts is None or facts.request_type != MessageType.CLARIFICATION_REQUEST.value:
            raise NotFound("no such clarification")
        answer_values = check_answers(rows, answers or [], rejected)

        intent_id = new_id()
        try:
            # A claim that committed for a caller already gone is released at once, not
            # stranded.
            facts, claimed, path = await bounded(
                self._claim(pending_id, answer_values, rejected, reason, intent_id),
                self.claim_bound_s,
                undo=lambda made: self._release(made[0], intent_id, converge=False),
            )
        except TimeoutError:
            await self._claim_timed_out(pending_id, intent_id)
        try:
            await failpoints.hit("respond.after_claim")
        except BaseException as error:
            await self._unhanded(facts, intent_id, error, "the answer could not be delivered")
        if path == "live":
            delivered = await self._deliver_live(facts, claimed, intent_id, rejected)
            if delivered is not None:
                return delivered
        return await self._deliver_detached(facts, claimed, intent_id, rejected)

    async def _claim_timed_out(self, pending_id: str, intent_id: str) -> NoReturn:
        """The claim did not finish within its bound (the database is saturated): it was
        cancelled, but its commit may have landed just before. Release by the intent (a no-op
        when nothing committed), then ask the client to send the answer again (503)."""

        async def release() -> claims.Released:
            async with write_tx(self.engine) as conn:
                return await claims.release(conn, pending_id, intent_id)

        try:
            released = await bounded(release())
        except Exception as error:
            log.error("claim of %s timed out and could not be released: %r", pending_id, error)
            raise DeliveryFailed(
                "the server is overloaded and the answer is held until the next start",
                retryable=False,
            ) from None
        await self._publish_quietly(released.rows)
        raise ServerBusy(
            "the server is too busy to take the answer now; nothing was kept, send it again",
            retryable=True,
        )

    async def _claim(
        self,
        pending_id: str,
        answer_values: dict[str, dict[str, Any]],
        rejected: bool,
        reason: str | None,
        intent_id: str,
    ) -> tuple[BundleFacts, list[dict[str, Any]], str]:
        """Classify and claim in one transaction holding the session lock (409 + state when
        the bundle is not active; nothing written)."""
        async with write_tx(self.engine) as conn:
            facts, state = await claims.classify_locked(
                conn, pending_id, self.waiters, "clarification"
            )
            pending = await claims.pending_rows(conn, facts.session_id, pending_id)
            patches = claim_patches(pending, answer_values, rejected, reason)
            path = "live" if state is BundleState.ACTIVE_LIVE else "detached"
            claimed = await claims.claim(
                conn, facts.session_id, pending_id, patches, intent_id, path
            )
            if len(claimed) != len(patches):
                raise NotActive("the question changed meanwhile", state="delivery_claimed")
        return facts, claimed, path

    # -- delivery -----------------------------------------------------------------------

    async def _deliver_live(
        self, facts: BundleFacts, claimed: list[dict[str, Any]], intent_id: str, rejected: bool
    ) -> str | None:
        """Hand the response to the waiting agent; ``None`` if the waiter vanished first (the
        caller then falls back to detached delivery with the same claim).

        The waiter is this process's, or another worker's (the bundle names it; the hand-over
        goes over NATS: ``backend/clarifications/handover.py``). Either way the waiter confirms
        durably before the agent sees the response. Without confirmation within
        :data:`LIVE_CONFIRM_WAIT_S` the claim is released — restored while its turn is
        current, retired otherwise (never restored after a successor was accepted) — and
        exactly one of release and confirmation wins (intent-keyed compare-and-set). A
        cancelled responder still waits for that outcome (shielded, bounded) before leaving.
        """
        loop = asyncio.get_running_loop()
        outcome = WaiterOutcome(
            "rejected" if rejected else "answered",
            () if rejected else agent_answers(claimed),
            intent_id=intent_id,
            confirmation=loop.create_future(),
        )
        cancelled: BaseException | None = None
        confirmed: list[dict[str, Any]] | None = None
        if self.waiters.resolve(facts.pending_id, outcome):
            assert outcome.confirmation is not None
            try:
                await bounded(_await_result(outcome.confirmation), LIVE_CONFIRM_WAIT_S + 1)
            except asyncio.CancelledError as error:
                cancelled = error
            confirmed = _result_or_none(outcome.confirmation)
        elif self.remote is not None and facts.live_worker not in (None, worker_id()):
            assert facts.live_worker is not None
            result, cancelled = await self.remote.deliver(
                facts.live_worker, facts.pending_id, outcome
            )
            if result == ABSENT and cancelled is None:
                return None
            if result == CONFIRMED:
                confirmed = await self._current_rows(claimed)
        else:
            return None
        return await self._settle_live(facts, claimed, intent_id, rejected, confirmed, cancelled)

    async def _settle_live(
        self,
        facts: BundleFacts,
        claimed: list[dict[str, Any]],
        intent_id: str,
        rejected: bool,
        confirmed: list[dict[str, Any]] | None,
        cancelled: BaseException | None,
    ) -> str:
        """After a hand-over: publish what the waiter confirmed, or release the claim."""
        if not confirmed:
            log.warning("live delivery of %s not confirmed in time", facts.pending_id)
            released = await self._release(facts, intent_id, converge=cancelled is None)
            if cancelled is not None:
                raise cancelled
            if released.rows:
                raise DeliveryFailed(
                    "the agent did not take the answer"
                    if released.restored
                    else "the question was superseded before the agent took the answer",
                    retryable=released.restored,
                )
            # Nothing held any more: the confirmation won after our deadline.
            confirmed = await self._current_rows(claimed)
            if any(
                row["metadata"].get("status") == RequestStatus.PENDING.value for row in confirmed
            ):
                raise DeliveryFailed("the answer was not delivered", retryable=True)
        await self._publish_quietly(confirmed)
        if cancelled is not None:
            raise cancelled
        return "rejected" if rejected else "delivered"

    async def _deliver_detached(
        self, facts: BundleFacts, claimed: list[dict[str, Any]], intent_id: str, rejected: bool
    ) -> str:
        if rejected:  # a detached Skip: persisted, the agent is not resumed
            try:
                rows = await self._finalize(facts.pending_id, intent_id)
            except BaseException as error:
                await self._unhanded(facts, intent_id, error, "the skip could not be saved")
            await self._publish_quietly(rows)
            return "rejected"
        answer = {
            "pending_id": facts.pending_id,
            "rejected": False,
            "answers": list(agent_answers(claimed)),
        }
        ticket = DispatchTicket()
        try:
            await self.orchestrator.resume.run(
                facts.session_id,
                facts.turn_id,
                facts.pending_id,
                [r["id"] for r in claimed],
                answer,
                ticket=ticket,
            )
        except BaseException as error:
            await self._resume_failed(facts, intent_id, ticket, error)
        await self._publish_quietly(await self._retire(facts.pending_id, intent_id))
        return "resumed"

    async def _resume_failed(
        self, facts: BundleFacts, intent_id: str, ticket: DispatchTicket, error: BaseException
    ) -> NoReturn:
        """Settle the claim by what the resume got to (the ticket), whatever was raised."""
        if ticket.may_have_been_sent:
            log.error("resume of %s ambiguous: %r", facts.pending_id, error)
            await self._publish_quietly(await self._retire(facts.pending_id, intent_id))
            if not isinstance(error, Exception):
                raise error
            raise DeliveryFailed(
                "the agent may already have the answer; do not send it again", retryable=False
            ) from None
        if not ticket.never_sent:
            # The reservation could not be rolled back: it and the claim stay for start-up
            # recovery, which restores exactly this claim (S29).
            log.error("resume of %s left unresolved: %r", facts.pending_id, error)
            try:  # clients converge on "no answerable question" until recovery decides
                await self.events.session_updated(facts.session_id, facts.task_id)
            except Exception as publish_error:
                log.warning("session %s not published: %r", facts.session_id, publish_error)
            if not isinstance(error, Exception):
                raise error
            raise DeliveryFailed(
                "the answer could not be released; it is answerable again after a restart",
                retryable=False,
            ) from None
        log.warning("resume of %s not accepted: %r", facts.pending_id, error)
        await self._unhanded(
            facts, intent_id, error, "the agent did not accept the answer", ticket.released
        )

    async def _unhanded(
        self,
        facts: BundleFacts,
        intent_id: str,
        error: BaseException,
        message: str,
        released: claims.Released | None = None,
    ) -> NoReturn:
        """The answer certainly never reached the agent: release the claim, then report.
        A cancellation stays a cancellation; a domain refusal (e.g. ``session_busy``) keeps its
        own error while the question is pending again; anything else is a 500 whose
        ``retryable`` says whether it is pending again."""
        released = await self._release(
            facts, intent_id, converge=isinstance(error, Exception), released=released
        )
        if not isinstance(error, Exception):
            raise error
        if isinstance(error, DomainError) and released.restored:
            raise error  # e.g. 409 session_busy: the question is pending; try again later
        if isinstance(error, DomainError):
            # Refused because a newer turn or a terminal state took over meanwhile: the
            # answer never left, and the question is history now (the claim was retired).
            message = "the question was superseded before its answer could be delivered"
        raise DeliveryFailed(message, retryable=released.restored) from None

    async def _finalize(self, bundle_id: str, intent_id: str) -> list[dict[str, Any]]:
        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                return await claims.finalize(conn, bundle_id, intent_id)

        return await bounded(work())

    async def _retire(self, bundle_id: str, intent_id: str) -> list[dict[str, Any]]:
        """Finalize after the answer may have left: a failure cannot undo that, so it is
        logged and start-up recovery retires the intent (its turn is no longer current)."""
        try:
            return await self._finalize(bundle_id, intent_id)
        except Exception as error:
            log.error("intent %s of %s not retired: %r", intent_id, bundle_id, error)
            return []

    async def _release(
        self,
        facts: BundleFacts,
        intent_id: str,
        *,
        converge: bool = True,
        released: claims.Released | None = None,
    ) -> claims.Released:
        """Release a claim whose answer never reached the agent (restore while current,
        retire otherwise), then make clients converge: publish the rows and acknowledge the
        task summary synchronously. Raises :class:`ConvergenceFailed` (still retryable) when
        a restore committed but either step failed (S39, S40). Without ``converge`` (the
        caller is gone) publication is best effort and the projector repairs the summary.
        ``released`` is a release already made (by a reservation's rollback) to converge on."""

        async def work() -> claims.Released:
            async with write_tx(self.engine) as conn:
                return await claims.release(conn, facts.pending_id, intent_id)

        if released is None:  # (a rolled-back reservation already released it)
            released = await bounded(work())
        if not released.rows:
            return released
        if not converge:
            await self._publish_quietly(released.rows)
            return released
        failures: list[str] = []
        try:
            await self._publish(released.rows)
        except Exception as error:
            log.warning("released rows of %s not published: %r", facts.pending_id, error)
            failures.append("publication")
        if released.restored:
            try:
                await self.summaries.refresh([facts.task_id])
            except Exception as error:
                log.warning("summary of task %s not acknowledged: %r", facts.task_id, error)
                failures.append("task summary")
        if failures and released.restored:
            raise ConvergenceFailed(
                f"the question is pending again and the same answer may be sent, but "
                f"{' and '.join(failures)} failed to converge",
                retryable=True,
            )
        return released

    async def _current_rows(self, claimed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The claimed rows as stored now (the waiter finalized them after our deadline)."""
        ids = [r["id"] for r in claimed]
        async with read_tx(self.engine) as conn:
            rows = await conn.execute(select(messages).where(messages.c.id.in_(ids)))
            return [dict(r._mapping) for r in rows]

    async def _publish(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            await self.events.message("session.message.updated", row)

    async def _publish_quietly(self, rows: list[dict[str, Any]]) -> None:
        """Terminal updates after a durable outcome: a failed publication cannot change the
        outcome (reads and the summary projector converge), so it is logged."""
        try:
            await self._publish(rows)
        except Exception as error:
            log.warning("message updates not published: %r", error)


async def _await_result(future: asyncio.Future[Any]) -> None:
    """Wait up to :data:`LIVE_CONFIRM_WAIT_S` for ``future``; its outcome is read after."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.shield(future), LIVE_CONFIRM_WAIT_S)


def _result_or_none(future: asyncio.Future[Any]) -> Any:
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result()
