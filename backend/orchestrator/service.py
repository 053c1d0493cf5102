"""The orchestrator: sessions, turns, agent dispatch and the agent's callbacks.

Every state change is a conditional statement checked against the rule (current turn, prompt
generation, non-terminal session), so late or duplicated agent callbacks are refused instead of
applied to a newer turn. Events are published after commit and only for rows a statement
actually changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend import failpoints
from backend.agentctl.client import PromptRequest
from backend.agentctl.errors import PromptDispatchError
from backend.authority import session_authority
from backend.authority.sql import (
    TERMINAL_STATES,
    current_turn_id,
    messages,
    sessions,
    tasks,
    turns,
)
from backend.clarifications import claims
from backend.clarifications.store import Question, create_bundle, detach, expire_current_turn
from backend.clarifications.waiters import LiveWaiter, WaiterOutcome, WaiterRegistry
from backend.clock import utcnow
from backend.db.bounded import BOUNDED_WRITE_S, bounded
from backend.db.engine import read_tx, write_tx
from backend.db.json import json_merge
from backend.errors import (
    AgentUnavailable,
    Conflict,
    DomainError,
    NotActive,
    NotFound,
    TurnNotCurrent,
)
from backend.events import Event
from backend.events.publisher import EventPublisher
from backend.ids import new_id
from backend.orchestrator import reservations
from backend.orchestrator.admission import (
    AdmittedTurn,
    acknowledge,
    admit_prompt,
    set_state_for_generation,
)
from backend.orchestrator.dispatch import PromptDispatcher, turn_data
from backend.orchestrator.reservations import COMPLETION_STATUS
from backend.orchestrator.resume import DetachedResume
from backend.orchestrator.watchdog import AnswerExpectation, PrimaryAnswerWatchdog
from backend.vocabulary import TERMINAL_SESSION_STATES, MessageType, PendingAction, SessionState
from backend.workflow import ClarificationPending, GuardUnavailable, advance_on_turn_complete

log = logging.getLogger(__name__)


__all__ = [
    "ClarificationResult",
    "Orchestrator",
    "PromptDispatcher",
    "ReservationUnresolved",
]

#: How often ready handling re-reads an unresolved reservation of another process.
RESERVATION_POLL_S = 0.05


class ReservationUnresolved(DomainError):
    """A ready event waited for an overlapping successor reservation that did not resolve in
    time (e.g. its rollback failed, S29): nothing was changed; the agent may send it again."""

    status = 503
    code = "reservation_unresolved"


@dataclass(frozen=True, slots=True)
class ClosedTurn:
    task_id: str
    #: The event's generation still owns the session: completion actions may run.
    owns_session: bool


@dataclass(frozen=True, slots=True)
class ClarificationResult:
    """How the agent's wait ended: ``answered``/``rejected``/``expired`` carry the waiter's
    outcome; ``detached`` means the wait ended without one and the bundle stays answerable."""

    outcome: str
    pending_id: str
    answers: tuple[dict[str, Any], ...] = ()


class Orchestrator:
    def __init__(
        self,
        engine: AsyncEngine,
        dispatcher: PromptDispatcher,
        events: EventPublisher,
        waiters: WaiterRegistry,
        callback_url: str,
        watchdog_delay_s: float = 30.0,
        ack_timeout_s: float = 10.0,
    ) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.events = events
        self.waiters = waiters
        self.callback_url = callback_url
        #: A dispatch plus the settling of its outcome: the acknowledgement deadline and a few
        #: bounded writes.
        self.dispatch_bound_s = ack_timeout_s + 3 * BOUNDED_WRITE_S
        #: How long a ready event waits for an overlapping reservation to resolve.
        self.reservation_wait_s = ack_timeout_s + 2 * BOUNDED_WRITE_S
        self.resume = DetachedResume(
            engine, dispatcher, events, callback_url, self.turn_complete, self.dispatch_bound_s
        )
        self.watchdog = PrimaryAnswerWatchdog(self, watchdog_delay_s)

    # -- sessions and prompts ------------------------------------------------------------

    async def create_session(
        self,
        task_id: str,
        prompt: str,
        *,
        is_primary: bool | None = None,
        agent_profile: str = "mock",
    ) -> tuple[dict[str, Any], str]:
        """Create a session and start its first turn; returns the session row and turn id."""

        async def create() -> tuple[AdmittedTurn, dict[str, Any]]:
            now = utcnow()
            session_id = new_id()
            async with write_tx(self.engine) as conn:
                # FOR KEY SHARE (PostgreSQL): a concurrent task deletion holds the row FOR
                # UPDATE; waiting here means we then see it gone (404) instead of failing the
                # session's foreign key (500). SQLite's write transaction serialises the two.
                exists = (
                    await conn.execute(
                        select(tasks.c.id)
                        .where(tasks.c.id == task_id)
                        .with_for_update(read=True, key_share=True)
                    )
                ).scalar_one_or_none()
                if exists is None:
                    raise NotFound("no such task")
                primary = is_primary
                if primary is None:
                    first = (
                        await conn.execute(
                            select(sessions.c.id).where(sessions.c.task_id == task_id)
                        )
                    ).first()
                    primary = first is None
                await conn.execute(
                    insert(sessions).values(
                        id=session_id,
                        task_id=task_id,
                        state=SessionState.CREATED.value,
                        is_primary=primary,
                        agent_profile=agent_profile,
                        prompt_generation=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
                admitted = await admit_prompt(conn, session_id)
                return admitted, await self._insert_message(conn, admitted, "user", prompt)

        admitted, user_message = await bounded(
            create(),
            undo=lambda made: self._start_turn(made[0], made[1], prompt),
            undo_seconds=self.dispatch_bound_s,
        )
        await bounded(self._start_turn(admitted, user_message, prompt), self.dispatch_bound_s)
        return await self.session_row(admitted.session_id), admitted.turn_id

    async def prompt(self, session_id: str, content: str) -> str:
        """Start a newer turn with ``content``; it supersedes every older pending question.

        Once admitted, the turn is announced and dispatched even if the caller goes away (a
        shielded, bounded unit): an admitted turn never stays RUNNING without its dispatch.
        """

        async def admit() -> tuple[AdmittedTurn, dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                admitted = await admit_prompt(conn, session_id)
                return admitted, await self._insert_message(conn, admitted, "user", content)

        admitted, user_message = await bounded(
            admit(),
            undo=lambda made: self._start_turn(made[0], made[1], content),
            undo_seconds=self.dispatch_bound_s,
        )
        await bounded(self._start_turn(admitted, user_message, content), self.dispatch_bound_s)
        return admitted.turn_id

    async def _start_turn(
        self, admitted: AdmittedTurn, user_message: dict[str, Any], content: str
    ) -> None:
        """An ordinary turn is public at once: its start, the prompt that opened it, then the
        dispatch. Announcing is best effort (reads converge); the dispatch is not."""
        try:
            await self.events.publish(Event("turn.started", turn_data(admitted)))
            await self.events.message("session.message.added", user_message)
        except Exception as error:
            log.warning("turn %s not announced: %r", admitted.turn_id, error)
        request = PromptRequest(
            session_id=admitted.session_id,
            turn_id=admitted.turn_id,
            prompt_generation=admitted.prompt_generation,
            content=content,
            callback_url=self.callback_url,
        )
        try:
            await self.dispatcher.dispatch_prompt(request)
        except PromptDispatchError as error:
            log.warning("prompt for session %s not acknowledged: %r", admitted.session_id, error)
            await self.turn_complete(
                admitted.session_id, admitted.turn_id, admitted.prompt_generation, "failed"
            )
            raise AgentUnavailable("the agent did not accept the prompt") from error
        try:
            async with write_tx(self.engine) as conn:
                await acknowledge(conn, admitted.turn_id)
        except Exception as error:  # the turn goes on; only a restart would fail it
            log.warning("acknowledgement of turn %s not stored: %r", admitted.turn_id, error)

    async def session_row(self, session_id: str) -> dict[str, Any]:
        async with read_tx(self.engine) as conn:
            row = (await conn.execute(select(sessions).where(sessions.c.id == session_id))).first()
        if row is None:
            raise NotFound("no such session")
        return dict(row._mapping)

    async def set_state(self, session_id: str, state: SessionState) -> dict[str, Any]:
        """Enter a terminal state; current-turn pending bundles expire with it (no overlay may
        survive a completed, failed or cancelled session).

        The terminal state alone already quarantines the bundles (the rule), so a failed
        expiry is logged, not reported: live waiters are still told ``expired`` and the
        session's revisioned projection is still published, so clients drop the question.
        """
        if state not in TERMINAL_SESSION_STATES:
            raise Conflict(f"{state} is not a state clients may set")

        async def enter() -> Any:
            async with write_tx(self.engine) as conn:
                return (
                    await conn.execute(
                        update(sessions)
                        .where(
                            sessions.c.id == session_id,
                            sessions.c.state.not_in(TERMINAL_STATES),
                        )
                        .values(state=state.value, updated_at=utcnow())
                        .returning(sessions.c.task_id)
                    )
                ).first()

        changed = await bounded(enter(), undo=lambda row: self._after_terminal(session_id, row))
        if changed is None:
            row = await self.session_row(session_id)
            if row["state"] == state.value:
                return row
            raise Conflict(f"the session is already {row['state']}")
        await bounded(self._after_terminal(session_id, changed))
        return await self.session_row(session_id)

    async def _after_terminal(self, session_id: str, changed: Any) -> None:
        if changed is None:
            return
        try:
            expired = await self._expire(session_id)
        except Exception as error:
            log.error(
                "expiry of session %s failed (the state quarantines it): %r", session_id, error
            )
            expired = []
        for row in expired:
            self.waiters.resolve(row["metadata"]["pending_id"], WaiterOutcome("expired"))
        for waiter in self.waiters.of_session(session_id):
            self.waiters.resolve(waiter.pending_id, WaiterOutcome("expired"))
        try:
            for row in expired:
                await self.events.message("session.message.updated", row)
            await self.events.session_updated(session_id, changed.task_id)
        except Exception as error:
            log.warning("terminal state of session %s not published: %r", session_id, error)

    async def _expire(self, session_id: str) -> list[dict[str, Any]]:
        await failpoints.hit("session.expire")
        async with write_tx(self.engine) as conn:
            return await expire_current_turn(conn, session_id)

    # -- agent callbacks -----------------------------------------------------------------

    async def agent_message(
        self, session_id: str, turn_id: str, generation: int, content: str
    ) -> dict[str, Any]:
        self.watchdog.on_activity(session_id)
        async with write_tx(self.engine) as conn:
            admitted = await self._current(conn, session_id, turn_id, generation)
            row = await self._insert_message(conn, admitted, "agent", content)
        await self.events.message("session.message.added", row)
        return row

    async def agent_clarification(
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

        async def store() -> tuple[str, list[dict[str, Any]]]:
            async with write_tx(self.engine) as conn:
                admitted = await self._current(
                    conn, session_id, turn_id, generation, open_turn=True
                )
                stored = await create_bundle(
                    conn,
                    session_id=session_id,
                    task_id=admitted.task_id,
                    turn_id=turn_id,
                    questions=questions,
                )
                await set_state_for_generation(
                    conn, session_id, generation, SessionState.WAITING_FOR_INPUT
                )
                return stored

        def waiter_for(bundle_id: str) -> LiveWaiter:
            return LiveWaiter(bundle_id, session_id, turn_id, generation)

        # Stored but the agent already gone: the question stays, detached (like a disconnect).
        bundle_id, rows = await bounded(
            store(),
            undo=lambda stored: self._detach_and_pause(waiter_for(stored[0])),
            undo_seconds=self.reservation_wait_s + 2 * BOUNDED_WRITE_S,
        )
        waiter = waiter_for(bundle_id)
        self.waiters.register(waiter)
        try:
            for row in rows:
                await self.events.message("session.message.added", row)
        except Exception as error:
            log.warning("question %s not published (reads converge): %r", bundle_id, error)
        gone = asyncio.ensure_future(agent_gone)
        try:
            await asyncio.wait(
                {waiter.future, gone},
                timeout=max(wait_seconds, 0),
                return_when=asyncio.FIRST_COMPLETED,
            )
        except asyncio.CancelledError:
            # The server cancelled the request: the agent is gone, the question must stay.
            self.waiters.drop(bundle_id)
            if waiter.future.done():
                _fail_confirmation(waiter.future.result(), "the agent went away")
            await self._detach_and_pause(waiter)
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

    async def _detach_and_pause(self, waiter: LiveWaiter) -> None:
        """Detach the bundle, then pause (complete) exactly the turn that asked.

        The waiter is the snapshot of turn authority taken when the question was asked, before
        detachment: a first or successor turn admitted meanwhile has a newer generation, so
        the pause's compare-and-set cannot complete it or change its session state.
        """
        await failpoints.hit("clarification.before_detach")
        await self._detach_and_publish(waiter.session_id, bundle_id=waiter.pending_id)
        await failpoints.hit("clarification.before_pause")
        await bounded(
            self.turn_complete(
                waiter.session_id, waiter.turn_id, waiter.prompt_generation, "paused"
            ),
            self.reservation_wait_s + BOUNDED_WRITE_S,
        )

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
                    rows = await claims.finalize(conn, waiter.pending_id, intent_id)
                    if rows:  # the agent goes on with its turn (if it has not ended)
                        await set_state_for_generation(
                            conn,
                            waiter.session_id,
                            waiter.prompt_generation,
                            SessionState.RUNNING,
                            while_open=waiter.turn_id,
                        )
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
                await bounded(
                    self.turn_complete(
                        waiter.session_id, waiter.turn_id, waiter.prompt_generation, "paused"
                    ),
                    self.reservation_wait_s + BOUNDED_WRITE_S,
                )
            raise
        return bool(rows)

    async def cancel_live(self, bundle_id: str) -> None:
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

    async def turn_complete(
        self, session_id: str, turn_id: str, generation: int, status: str
    ) -> bool:
        """The ready event. It first waits for any overlapping successor reservation to
        resolve, then applies only while its generation still owns the session (S28). A stale
        event closes its own turn as history and runs no completion action (no detach pass,
        no session state, no workflow transition) against a newer or reserved turn."""
        closed = await self._close_turn(session_id, turn_id, generation, status)
        if closed is None or not closed.owns_session:
            return False
        self.watchdog.on_activity(session_id)
        # Turn teardown detaches what the agent no longer waits for (a no-op when done).
        for waiter in self.waiters.of_session(session_id):
            if waiter.turn_id == turn_id:
                self.waiters.drop(waiter.pending_id)
        await self._detach_and_publish(session_id, turn_id=turn_id)
        async with write_tx(self.engine) as conn:
            (authority,) = await session_authority(conn, sessions.c.id == session_id)
            waiting = authority.pending_action is PendingAction.CLARIFICATION
            next_state = SessionState.WAITING_FOR_INPUT if waiting else SessionState.IDLE
            changed = await set_state_for_generation(conn, session_id, generation, next_state)
        ids = {"session_id": session_id, "task_id": closed.task_id}
        if changed:
            await self.events.publish(Event("session.updated", ids))
        await self.events.publish(
            Event("turn.completed", {**ids, "turn_id": turn_id, "status": status})
        )
        if status == "completed":
            await self._advance_workflow(closed.task_id)
        return True

    async def _close_turn(
        self, session_id: str, turn_id: str, generation: int, status: str
    ) -> ClosedTurn | None:
        """Close the named turn once no other reservation of the session is unresolved.

        The check and the close are one transaction holding the session lock, so a
        reservation admitted afterwards is seen by the generation check instead. ``None``: no
        such open turn at that generation (a duplicate or unknown event)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.reservation_wait_s
        while True:
            async with write_tx(self.engine) as conn:
                await claims.lock_session(conn, session_id)
                blocking = await reservations.unresolved(conn, session_id, other_than=turn_id)
                if blocking is None:
                    owner = (
                        await conn.execute(
                            select(sessions.c.prompt_generation).where(sessions.c.id == session_id)
                        )
                    ).scalar_one_or_none()
                    closed = (
                        await conn.execute(
                            update(turns)
                            .where(
                                turns.c.id == turn_id,
                                turns.c.session_id == session_id,
                                turns.c.prompt_generation == generation,
                                turns.c.completed_at.is_(None),
                            )
                            .values(
                                completed_at=utcnow(),
                                metadata=json_merge(turns.c.metadata, {COMPLETION_STATUS: status}),
                            )
                            .returning(turns.c.task_id)
                        )
                    ).first()
                    if closed is None:
                        return None
                    return ClosedTurn(closed.task_id, owns_session=owner == generation)
            await failpoints.hit("ready.awaits_reservation")
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise ReservationUnresolved(
                    "a successor reservation of this session has not resolved; retry later"
                )
            resolution = self.resume.resolution_of(blocking)
            if resolution is None:  # another process's reservation: poll the database
                await asyncio.sleep(min(RESERVATION_POLL_S, remaining))
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(resolution.wait(), remaining)

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

    # -- helpers -------------------------------------------------------------------------

    async def _detach_and_publish(
        self, session_id: str, *, bundle_id: str | None = None, turn_id: str | None = None
    ) -> None:
        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                return await detach(conn, session_id, bundle_id=bundle_id, turn_id=turn_id)

        for row in await bounded(work()):
            await self.events.message("session.message.updated", row)

    async def _current(
        self,
        conn: AsyncConnection,
        session_id: str,
        turn_id: str,
        generation: int,
        *,
        open_turn: bool = False,
    ) -> AdmittedTurn:
        """The callback's turn, if it is still the session's current turn and generation
        (and, with ``open_turn``, not yet completed: a question asked in a turn that already
        ended — paused, or failed by start-up — would set a state nothing can finish)."""
        ended = (
            select(turns.c.completed_at.is_not(None)).where(turns.c.id == turn_id).scalar_subquery()
        )
        row = (
            await conn.execute(
                select(
                    sessions.c.task_id,
                    sessions.c.state,
                    sessions.c.prompt_generation,
                    current_turn_id(literal(session_id)),
                    ended,
                ).where(sessions.c.id == session_id)
            )
        ).first()
        if row is None:
            raise NotFound("no such session")
        task_id, state, current_generation, current, has_ended = row
        if (
            state in TERMINAL_SESSION_STATES
            or current != turn_id
            or current_generation != generation
        ):
            raise TurnNotCurrent("that turn is no longer the session's current turn")
        if open_turn and has_ended:
            raise TurnNotCurrent("that turn has already ended")
        return AdmittedTurn(session_id, task_id, turn_id, generation)

    async def _insert_message(
        self, conn: AsyncConnection, turn: AdmittedTurn, author: str, content: str
    ) -> dict[str, Any]:
        row = {
            "id": new_id(),
            "session_id": turn.session_id,
            "task_id": turn.task_id,
            "turn_id": turn.turn_id,
            "type": MessageType.MESSAGE.value,
            "author": author,
            "content": content,
            "metadata": {},
            "created_at": utcnow(),
        }
        await conn.execute(insert(messages).values(**row))
        return row


class AgentGone(Exception):
    """The live waiter's agent went away before it could confirm the response."""


def _fail_confirmation(outcome: WaiterOutcome, reason: str) -> None:
    """Tell a responder waiting on ``outcome`` at once that no confirmation is coming."""
    if outcome.confirmation is not None and not outcome.confirmation.done():
        outcome.confirmation.set_exception(AgentGone(reason))
