"""The agent's side of a permission request: the row is stored in the agent's running turn,
and the agent's pending ``session/request_permission`` is held as the live waiter until the
user's choice arrives, or the request is over.

The waiter is only a delivery channel; the database decides what is answerable. A response
is handed to the waiter only after it claimed the row (``store.claim``), and the waiter
confirms it durably (``store.confirm``) before the agent hears the choice; the responder's
release and the confirmation are keyed by the same intent, so exactly one of them wins.

The wait ends without an answer when the agent's request is cancelled (its process stopped,
its connection closed, shutdown) or when the request stops being answerable: a newer turn,
the turn ended, the session became terminal, or another process settled the row. Those can be
committed by any process, so the waiter re-reads its turn's authority every
:data:`RECHECK_S` instead of trusting in-process events. Every exit is in docs/reliability.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.clarifications import claims
from backend.clarifications.waiters import LiveWaiter, WaiterOutcome, WaiterRegistry
from backend.db.bounded import bounded
from backend.db.engine import read_tx, write_tx
from backend.errors import NotFound, TurnNotCurrent
from backend.orchestrator.admission import require_current, set_state_for_generation
from backend.permissions import store
from backend.permissions.announce import Announcer
from backend.permissions.requests import PermissionOption, title_of, usable_options
from backend.vocabulary import SessionState

log = logging.getLogger(__name__)

#: How often a waiting request re-reads whether its turn is still current and open.
RECHECK_S = 0.5
#: The outcome shutdown ends a wait with.
CLOSED = "closed"


class AgentGone(Exception):
    """The waiting agent's request ended before it could take a handed-over answer."""


class LivePermissions:
    """The agents' permission requests held open in this process."""

    def __init__(
        self,
        engine: AsyncEngine,
        announcer: Announcer,
        waiters: WaiterRegistry,
        *,
        recheck_s: float = RECHECK_S,
    ) -> None:
        self.engine = engine
        self.announcer = announcer
        self.waiters = waiters
        self.recheck_s = recheck_s

    async def ask(
        self,
        session_id: str,
        turn_id: str,
        generation: int,
        title: str,
        options: Sequence[PermissionOption],
    ) -> str | None:
        """Store the request in the turn (only while it is the session's current, open turn
        at ``generation``), then wait as the live waiter. Returns the chosen option id, or
        ``None`` when it was not answered (refused, cancelled, superseded, expired); a
        cancelled caller leaves the row settled and gets its ``CancelledError`` back."""
        offered = usable_options(options)
        if not offered:
            return None  # nothing the user could choose

        async def store_request() -> tuple[dict[str, Any], LiveWaiter] | None:
            """The row and the session waiting for input, in one transaction, with the waiter
            registered before the commit (:meth:`WaiterRegistry.until_committed`); ``None``
            (nothing written) unless the turn is still current, open and at ``generation``."""
            with self.waiters.until_committed() as hold:
                async with write_tx(self.engine) as conn:
                    try:
                        admitted = await require_current(
                            conn, session_id, turn_id, generation, open_turn=True
                        )
                    except (TurnNotCurrent, NotFound) as refused:
                        log.info("permission request in turn %s refused: %s", turn_id, refused)
                        return None
                    row = await store.insert_request(conn, admitted, title_of(title), offered)
                    await set_state_for_generation(
                        conn, session_id, generation, SessionState.WAITING_FOR_INPUT
                    )
                    waiter = LiveWaiter(
                        row["metadata"]["pending_id"], session_id, turn_id, generation
                    )
                    hold(waiter)
                # Committed, answerable already, not yet announced; a fault here is an
                # unknown commit outcome: the waiter goes, and a response (finding no waiter)
                # or recovery cancels the row.
                await failpoints.hit("permission.after_store")
            return row, waiter

        stored = await bounded(store_request(), undo=self._abandon)
        if stored is None:
            return None
        row, waiter = stored
        try:
            await self.announcer.rows("session.message.added", [row])
            await self._wait(waiter)
        except BaseException:  # the agent's request was cancelled
            self.waiters.drop(waiter.pending_id)
            handoff = _handoff(waiter)
            _fail(handoff, "the agent's request was cancelled")
            await self._settle(session_id, waiter.pending_id, handoff)
            raise
        # No await between the wait's end and the drop: a responder that has not handed over
        # by now finds no waiter (and releases its claim).
        self.waiters.drop(waiter.pending_id)
        handoff = _handoff(waiter)
        if handoff is None:
            if not _closed(waiter):  # (shutdown settled it already)
                await self._settle(session_id, waiter.pending_id, None)
            return None
        if await self._confirm(waiter, handoff):
            return str(handoff.answers[0]["option_ids"][0])
        return None

    async def close(self) -> None:
        """Shutdown: no agent will hear an answer any more. Every waiter ends now and its
        request is settled before the engine goes away (its own ``ask`` then finds nothing
        left to write)."""
        for waiter in self.waiters.all():
            self.waiters.drop(waiter.pending_id)
            handoff = _handoff(waiter)
            if waiter.future.done():
                _fail(handoff, "the backend is stopping")
            else:
                waiter.future.set_result(WaiterOutcome(CLOSED))
            await self._settle(waiter.session_id, waiter.pending_id, handoff)

    # -- the steps --------------------------------------------------------------------------

    async def _abandon(self, stored: tuple[dict[str, Any], LiveWaiter] | None) -> None:
        """Stored, but the agent's request was cancelled meanwhile: settle it at once."""
        if stored is not None:
            row, waiter = stored
            self.waiters.drop(waiter.pending_id)
            handoff = _handoff(waiter)  # a response may have come first
            _fail(handoff, "the agent's request was cancelled")
            await self._settle(row["session_id"], waiter.pending_id, handoff)

    async def _wait(self, waiter: LiveWaiter) -> None:
        """Until a response is handed over, or the request is no longer answerable."""
        while not waiter.future.done():
            await asyncio.wait({waiter.future}, timeout=self.recheck_s)
            if waiter.future.done() or not await bounded(self._answerable(waiter)):
                return

    async def _answerable(self, waiter: LiveWaiter) -> bool:
        """The waiter's turn is still current, open and at its generation in a live session,
        and the row is still waiting (pending, or held by a response). A failed read keeps
        the wait going: only the database's word ends it."""
        try:
            async with read_tx(self.engine) as conn:
                await require_current(
                    conn,
                    waiter.session_id,
                    waiter.turn_id,
                    waiter.prompt_generation,
                    open_turn=True,
                )
                return await store.still_waiting(conn, waiter.pending_id)
        except (TurnNotCurrent, NotFound):
            return False
        except Exception as error:
            log.warning("permission %s: authority not read: %r", waiter.pending_id, error)
            return True

    async def _confirm(self, waiter: LiveWaiter, handoff: WaiterOutcome) -> bool:
        """Durable confirmation before the agent hears the choice: retire the intent (the row
        stays ``answered``) and give the session back to the running agent. Runs to the end
        once started; ``False`` when the responder released the claim first (the agent is
        told the request was cancelled) or the write failed (the responder then releases)."""
        assert handoff.intent_id is not None and handoff.confirmation is not None
        intent_id, confirmation = handoff.intent_id, handoff.confirmation

        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                rows = await claims.confirm_live(conn, waiter, intent_id)
            if not confirmation.done():  # the responder learns the outcome at once
                confirmation.set_result(rows)
            return rows

        try:
            return bool(await bounded(work()))
        except BaseException as error:
            _fail(handoff, f"confirmation failed: {error!r}")  # (no-op once confirmed)
            if not isinstance(error, Exception):
                raise
            log.warning("permission %s: confirmation failed: %r", waiter.pending_id, error)
            return False

    async def _settle(self, session_id: str, bundle_id: str, handoff: WaiterOutcome | None) -> None:
        """The wait ended without the agent taking an answer: ``expired`` in a terminal
        session, ``cancelled`` in the current turn, untouched when superseded; a claim handed
        over but not taken is released (``cancelled``). Bounded; a failure leaves the row
        pending, which a response (no waiter here) or start-up recovery cancels later."""

        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                await claims.lock_session(conn, session_id)
                rows = await store.settle(conn, bundle_id)
                if handoff is not None and handoff.intent_id is not None:
                    rows += await store.release(conn, bundle_id, handoff.intent_id)
                return rows

        try:
            rows = await bounded(work())
        except Exception as error:
            log.error("permission %s not settled: %r", bundle_id, error)
            return
        await self.announcer.rows("session.message.updated", rows)


def _handoff(waiter: LiveWaiter) -> WaiterOutcome | None:
    """The response handed to ``waiter``, if one was (a claim with its intent)."""
    if not waiter.future.done() or waiter.future.cancelled():
        return None
    outcome = waiter.future.result()
    return outcome if outcome.intent_id is not None else None


def _closed(waiter: LiveWaiter) -> bool:
    done = waiter.future.done() and not waiter.future.cancelled()
    return done and waiter.future.result().outcome == CLOSED


def _fail(handoff: WaiterOutcome | None, reason: str) -> None:
    """Tell a responder waiting on ``handoff`` at once that the agent will not take it."""
    confirmation = handoff.confirmation if handoff is not None else None
    if confirmation is not None and not confirmation.done():
        confirmation.set_exception(AgentGone(reason))
