"""``POST /api/v1/permission/{pending_id}/respond``: the user's choice, delivered exactly once.

1. Validate: the request exists (404) and offers the option (400); nothing written.
2. Claim, in one transaction holding the session lock: classify the request with the one
   rule, in the clarification respond's order (409 ``delivery_claimed`` / ``terminal`` /
   ``superseded_history``, nothing written); only an active request with a live waiter (in
   this process, or in another worker that lives) is claimed (``answered`` + a delivery
   intent, one compare-and-set: of two concurrent responses exactly one claims, the other
   gets 409). An active request *without* a live waiter cannot be answered: its agent is gone
   (a backend restart stops every agent process). It is cancelled in the same transaction and
   the response gets 409 ``terminal``.
3. Hand over (to another worker's waiter over NATS: ``backend/clarifications/handover.py``):
   the waiter confirms durably before the agent hears the choice; without that confirmation
   within :data:`CONFIRM_WAIT_S` the claim is released (``cancelled``), racing the
   confirmation through the intent, so exactly one of them wins.

Every exit is in docs/reliability.md (*Permission requests*).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import BundleFacts, BundleState, bundle_facts
from backend.clarifications import claims
from backend.clarifications.answers import InvalidResponse, bundle_rows
from backend.clarifications.handover import ABSENT, CONFIRMED, RemoteWaiters
from backend.clarifications.waiters import WaiterOutcome, WaiterRegistry
from backend.db.bounded import bounded
from backend.db.engine import read_tx, write_tx
from backend.db.tables import messages
from backend.errors import NotActive, NotFound
from backend.ids import new_id
from backend.permissions import store
from backend.permissions.announce import Announcer
from backend.permissions.requests import chosen_answer
from backend.vocabulary import MessageType, RequestStatus
from backend.workers import worker_id

log = logging.getLogger(__name__)

#: How long a response waits for the agent's side to confirm the handed-over choice.
CONFIRM_WAIT_S = 10.0


@dataclass(frozen=True, slots=True)
class _Claim:
    facts: BundleFacts
    rows: list[dict[str, Any]]
    #: No agent waits here: the rows are the request, cancelled instead of claimed.
    orphaned: bool = False


class PermissionResponder:
    def __init__(
        self,
        engine: AsyncEngine,
        announcer: Announcer,
        waiters: WaiterRegistry,
        *,
        confirm_wait_s: float = CONFIRM_WAIT_S,
        remote: RemoteWaiters | None = None,
    ) -> None:
        self.engine = engine
        self.announcer = announcer
        self.waiters = waiters
        self.confirm_wait_s = confirm_wait_s
        #: Other workers' waiters (several workers on NATS); ``None`` in one process.
        self.remote = remote

    async def respond(self, bundle_id: str, option_id: str) -> str:
        """Deliver ``option_id`` to the waiting agent; returns ``delivered``."""
        async with read_tx(self.engine) as conn:
            facts = await bundle_facts(conn, bundle_id)
            rows = await bundle_rows(conn, bundle_id)
        if facts is None or facts.request_type != MessageType.PERMISSION_REQUEST.value:
            raise NotFound("no such permission request")
        answer = chosen_answer(rows[0].metadata, option_id)
        if answer is None:
            raise InvalidResponse(f"unknown option id {option_id!r}")
        intent_id = new_id()
        # A claim that committed for a caller already gone is put back at once, not stranded.
        claim = await bounded(
            self._claim(bundle_id, answer, intent_id),
            undo=lambda made: self._undo(made, intent_id),
        )
        if claim.orphaned:
            await self.announcer.rows("session.message.updated", claim.rows, acknowledge=True)
            raise NotActive(
                "no agent is waiting for this request any more; it was cancelled",
                state=BundleState.TERMINAL.value,
            )
        return await self._hand_over(claim, answer, intent_id)

    async def _claim(self, bundle_id: str, answer: dict[str, Any], intent_id: str) -> _Claim:
        """Classify and claim in one transaction holding the session lock (409 + state when
        the request is not active; nothing written)."""
        async with write_tx(self.engine) as conn:
            facts, state = await claims.classify_locked(
                conn, bundle_id, self.waiters, "permission request"
            )
            if state is BundleState.ACTIVE_DETACHED:
                return _Claim(facts, await store.settle(conn, bundle_id), orphaned=True)
            claimed = await store.claim(conn, facts.session_id, bundle_id, answer, intent_id)
            if not claimed:
                raise NotActive("the request changed meanwhile", state="delivery_claimed")
        return _Claim(facts, claimed)

    async def _undo(self, claim: _Claim, intent_id: str) -> None:
        """The caller went away right after the claim committed, before any handover: the
        request is pending again (the agent still waits), or announced as cancelled."""
        if claim.orphaned:
            await self.announcer.rows("session.message.updated", claim.rows)
            return

        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                return await claims.restore(conn, claim.facts.pending_id, intent_id)

        await self.announcer.rows("session.message.updated", await bounded(work()))

    async def _hand_over(self, claim: _Claim, answer: dict[str, Any], intent_id: str) -> str:
        """Give the claim to the waiting agent and wait (bounded) for its durable
        confirmation. A cancelled caller still waits for that outcome before leaving."""
        bundle_id = claim.facts.pending_id
        confirmation: asyncio.Future[list[dict[str, Any]]] = (
            asyncio.get_running_loop().create_future()
        )
        handoff = WaiterOutcome(
            "answered", (answer,), intent_id=intent_id, confirmation=confirmation
        )
        cancelled: BaseException | None = None
        confirmed = None
        owner = claim.facts.live_worker
        if self.waiters.resolve(bundle_id, handoff):
            try:
                await bounded(
                    asyncio.wait({confirmation}, timeout=self.confirm_wait_s),
                    self.confirm_wait_s + 1,
                )
            except asyncio.CancelledError as error:
                cancelled = error
            if confirmation.done() and confirmation.exception() is None:  # (never cancelled)
                confirmed = confirmation.result()
        elif self.remote is not None and owner not in (None, worker_id()):
            assert owner is not None
            result, cancelled = await self.remote.deliver(owner, bundle_id, handoff)
            if result == CONFIRMED:
                confirmed = await self._answered(claim.rows)
            elif result == ABSENT:
                await self._stopped_waiting(bundle_id, intent_id)
        else:
            await self._stopped_waiting(bundle_id, intent_id)
        if not confirmed:
            released = await self._release(bundle_id, intent_id)
            if cancelled is not None:
                raise cancelled
            confirmed = [] if released else await self._answered(claim.rows)
            if not confirmed:
                raise NotActive(
                    "the agent stopped waiting before it took the answer",
                    state=BundleState.TERMINAL.value,
                )
            # Nothing was held any more: the confirmation won after the deadline.
        await self.announcer.rows("session.message.updated", confirmed, acknowledge=True)
        if cancelled is not None:
            raise cancelled
        return "delivered"

    async def _stopped_waiting(self, bundle_id: str, intent_id: str) -> None:
        """Nobody took the claim (no waiter any more): the request is over."""
        await self._release(bundle_id, intent_id)
        raise NotActive(
            "the agent stopped waiting before it took the answer",
            state=BundleState.TERMINAL.value,
        )

    async def _release(self, bundle_id: str, intent_id: str) -> list[dict[str, Any]]:
        """The agent never took the claim: the request is over (``cancelled``). Empty when the
        confirmation (or the agent's own settling) got there first."""

        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                return await store.release(conn, bundle_id, intent_id)

        rows = await bounded(work())
        await self.announcer.rows("session.message.updated", rows, acknowledge=True)
        return rows

    async def _answered(self, claimed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The claimed rows as stored now, if the agent's confirmation made them answered."""
        ids = [row["id"] for row in claimed]
        async with read_tx(self.engine) as conn:
            rows = [
                dict(r._mapping)
                for r in await conn.execute(select(messages).where(messages.c.id.in_(ids)))
            ]
        answered = RequestStatus.ANSWERED.value
        return [r for r in rows if r["metadata"].get("status") == answered]
