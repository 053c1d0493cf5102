"""The orchestrator: sessions, turns, agent dispatch and the agent's callbacks.

Every state change is a conditional statement checked against the rule (current turn, prompt
generation, non-terminal session), so late or duplicated agent callbacks are refused instead of
applied to a newer turn. Events are published after commit and only for rows a statement
actually changed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import insert, literal, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from backend import failpoints
from backend.agentctl.client import PromptRequest
from backend.agentctl.errors import PromptDispatchError, PromptNotAcknowledged, PromptRejected
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
from backend.db.bounded import bounded
from backend.db.engine import read_tx, write_tx
from backend.errors import AgentUnavailable, Conflict, NotFound, TurnNotCurrent
from backend.events import Event
from backend.events.publisher import EventPublisher
from backend.ids import new_id
from backend.orchestrator import reservations
from backend.orchestrator.admission import (
    AdmittedTurn,
    admit_prompt,
    set_state_for_generation,
)
from backend.orchestrator.watchdog import AnswerExpectation, PrimaryAnswerWatchdog
from backend.vocabulary import TERMINAL_SESSION_STATES, MessageType, PendingAction, SessionState
from backend.workflow import ClarificationPending, GuardUnavailable, advance_on_turn_complete

log = logging.getLogger(__name__)


class PromptDispatcher:
    """What the orchestrator needs of an agent executor (``AgentctlClient`` provides it)."""

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:  # pragma: no cover
        raise NotImplementedError


class ResumeNotAccepted(Exception):
    """The agent certainly did not take the detached answer; it may be restored and retried."""


class ResumeAmbiguous(Exception):
    """The agent may have taken the detached answer; it must never be dispatched again."""


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
    ) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.events = events
        self.waiters = waiters
        self.callback_url = callback_url
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
        now = utcnow()
        session_id = new_id()
        async with write_tx(self.engine) as conn:
            # FOR KEY SHARE (PostgreSQL): a concurrent task deletion holds the row FOR UPDATE;
            # waiting here means we then see it gone (404) instead of failing the session's
            # foreign key (500). SQLite's write transaction already serialises the two.
            exists = (
                await conn.execute(
                    select(tasks.c.id)
                    .where(tasks.c.id == task_id)
                    .with_for_update(read=True, key_share=True)
                )
            ).scalar_one_or_none()
            if exists is None:
                raise NotFound("no such task")
            if is_primary is None:
                first = (
                    await conn.execute(select(sessions.c.id).where(sessions.c.task_id == task_id))
                ).first()
                is_primary = first is None
            await conn.execute(
                insert(sessions).values(
                    id=session_id,
                    task_id=task_id,
                    state=SessionState.CREATED.value,
                    is_primary=is_primary,
                    agent_profile=agent_profile,
                    prompt_generation=0,
                    created_at=now,
                    updated_at=now,
                )
            )
            admitted = await admit_prompt(conn, session_id)
            user_message = await self._insert_message(conn, admitted, "user", prompt)
        await self._announce_turn(admitted, user_message)
        await self._dispatch(admitted, prompt)
        return await self.session_row(session_id), admitted.turn_id

    async def prompt(self, session_id: str, content: str) -> str:
        """Start a newer turn with ``content``; it supersedes every older pending question."""
        async with write_tx(self.engine) as conn:
            admitted = await admit_prompt(conn, session_id)
            user_message = await self._insert_message(conn, admitted, "user", content)
        await self._announce_turn(admitted, user_message)
        await self._dispatch(admitted, content)
        return admitted.turn_id

    async def _announce_turn(self, admitted: AdmittedTurn, user_message: dict[str, Any]) -> None:
        """An ordinary turn is public at once: its start, then the prompt that opened it."""
        await self.events.publish(Event("turn.started", _turn_data(admitted)))
        await self.events.message("session.message.added", user_message)

    async def _dispatch(self, admitted: AdmittedTurn, content: str) -> None:
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

    async def session_row(self, session_id: str) -> dict[str, Any]:
        async with read_tx(self.engine) as conn:
            row = (await conn.execute(select(sessions).where(sessions.c.id == session_id))).first()
        if row is None:
            raise NotFound("no such session")
        return dict(row._mapping)

    async def set_state(self, session_id: str, state: SessionState) -> dict[str, Any]:
        """Enter a terminal state; current-turn pending bundles expire with it (no overlay may
        survive a completed, failed or cancelled session)."""
        if state not in TERMINAL_SESSION_STATES:
            raise Conflict(f"{state} is not a state clients may set")
        async with write_tx(self.engine) as conn:
            changed = (
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
        if changed is None:
            row = await self.session_row(session_id)
            if row["state"] == state.value:
                return row
            raise Conflict(f"the session is already {row['state']}")
        expired = await bounded(self._expire(session_id))
        for row in expired:
            self.waiters.resolve(row["metadata"]["pending_id"], WaiterOutcome("expired"))
            await self.events.message("session.message.updated", row)
        await self.events.publish(
            Event("session.updated", {"session_id": session_id, "task_id": changed.task_id})
        )
        return await self.session_row(session_id)

    async def _expire(self, session_id: str) -> list[dict[str, Any]]:
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
        async with write_tx(self.engine) as conn:
            admitted = await self._current(conn, session_id, turn_id, generation)
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
        self.waiters.register(waiter)
        for row in rows:
            await self.events.message("session.message.added", row)
        gone = asyncio.ensure_future(agent_gone)
        try:
            done, _ = await asyncio.wait(
                {waiter.future, gone},
                timeout=max(wait_seconds, 0),
                return_when=asyncio.FIRST_COMPLETED,
            )
        except asyncio.CancelledError:
            # The server cancelled the request: the agent is gone, the question must stay.
            self.waiters.drop(bundle_id)
            await self._detach_and_pause(waiter)
            raise
        finally:
            gone.cancel()
        if waiter.future in done:
            outcome = waiter.future.result()
            if outcome.intent_id is None:
                return ClarificationResult(outcome.outcome, bundle_id, outcome.answers)
            if await self._confirm_delivery(waiter, outcome):
                if outcome.outcome == "answered":
                    expectation = AnswerExpectation(session_id, turn_id, generation, utcnow())
                    self.watchdog.arm(expectation, bundle_id, outcome.answers)
                await failpoints.hit("waiter.after_confirm")  # e.g. the response gets lost
                return ClarificationResult(outcome.outcome, bundle_id, outcome.answers)
            # The responder gave up and restored the question: the agent must not see it.
            return ClarificationResult("detached", bundle_id)
        self.waiters.drop(bundle_id)
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
            )
        )

    async def _confirm_delivery(self, waiter: LiveWaiter, outcome: WaiterOutcome) -> bool:
        """Durable confirmation before the agent gets the response. Once started it runs to
        the end (even if the responder stopped waiting), and it serializes against the
        responder's restore through the intent id: exactly one of them wins."""
        assert outcome.intent_id is not None and outcome.confirmation is not None
        await failpoints.hit("waiter.before_confirm")

        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                rows = await claims.finalize(conn, waiter.pending_id, outcome.intent_id)
                if rows:  # the agent goes on with its turn
                    await set_state_for_generation(
                        conn, waiter.session_id, waiter.prompt_generation, SessionState.RUNNING
                    )
                return rows

        try:
            rows = await bounded(work())
        except Exception as error:
            if not outcome.confirmation.done():
                outcome.confirmation.set_exception(error)
            raise
        if not outcome.confirmation.done():
            outcome.confirmation.set_result(rows)
        return bool(rows)

    async def resume_with_answer(
        self,
        session_id: str,
        source_turn_id: str | None,
        bundle_id: str,
        claimed_ids: list[str],
        answer: dict[str, Any],
        expect: AnswerExpectation | None = None,
    ) -> str:
        """Dispatch a detached answer as a new prompt, at most once; returns the new turn id.

        Raises :class:`ResumeNotAccepted` when the agent certainly did not take it (the
        reservation is rolled back: the bundle may be restored), or :class:`ResumeAmbiguous`
        when it may have (the successor stays; the answer must stay terminal).
        """
        metadata = reservations.reservation_metadata(source_turn_id, bundle_id, claimed_ids)
        async with write_tx(self.engine) as conn:
            admitted = await admit_prompt(conn, session_id, turn_metadata=metadata, expect=expect)
        try:
            await failpoints.hit("resume.after_reserve")
            await failpoints.hit("resume.attempt_mark")
            async with write_tx(self.engine) as conn:
                if not await reservations.mark_attempted(conn, admitted.turn_id):
                    raise RuntimeError("reservation vanished before the attempt mark")
        except Exception as error:
            await self._roll_back(admitted)
            raise ResumeNotAccepted("could not mark the dispatch attempt") from error
        await failpoints.hit("resume.after_attempt_mark")
        request = PromptRequest(
            session_id=session_id,
            turn_id=admitted.turn_id,
            prompt_generation=admitted.prompt_generation,
            content="(answer to the agent's question)",
            callback_url=self.callback_url,
            answer=answer,
        )
        try:
            await self.dispatcher.dispatch_prompt(request)
        except (PromptRejected, PromptNotAcknowledged) as error:
            # Refused, or not acknowledged within the bounded wait: acceptance failed (S34).
            await self._roll_back(admitted)
            raise ResumeNotAccepted(str(error)) from error
        except PromptDispatchError as error:
            await self._publish_successor(admitted)
            await self.turn_complete(
                session_id, admitted.turn_id, admitted.prompt_generation, "failed"
            )
            raise ResumeAmbiguous(str(error)) from error
        try:
            await failpoints.hit("resume.before_publish")
            await self._publish_successor(admitted)
        except Exception as error:
            raise ResumeAmbiguous("the agent accepted the answer; publication failed") from error
        return admitted.turn_id

    async def cancel_live(self, bundle_id: str) -> None:
        """Cancel a request held by this process's waiter store (404 otherwise): its pending
        rows become ``cancelled`` and the waiting agent is told so."""
        waiter = self.waiters.get(bundle_id)
        if waiter is None or not self.waiters.has_waiter(bundle_id):
            raise NotFound("no live clarification with that id here")

        async def work() -> list[dict[str, Any]]:
            async with write_tx(self.engine) as conn:
                return await claims.cancel(conn, waiter.session_id, bundle_id)

        rows = await bounded(work())
        self.waiters.resolve(bundle_id, WaiterOutcome("cancelled"))
        for row in rows:
            await self.events.message("session.message.updated", row)

    async def _roll_back(self, admitted: AdmittedTurn) -> None:
        """Undo a reservation the agent certainly did not take. If that cannot be proven done,
        the reservation stays: the session remains claimed (prompts are refused as busy) and
        start-up recovery reconciles it; the answer must not be offered again meanwhile."""

        async def work() -> bool:
            await failpoints.hit("resume.rollback")
            async with write_tx(self.engine) as conn:
                return await reservations.roll_back(
                    conn, admitted.session_id, admitted.turn_id, admitted.prompt_generation
                )

        try:
            rolled_back = await bounded(work())
        except Exception as error:
            log.error("rollback of reservation %s failed: %r", admitted.turn_id, error)
            rolled_back = False
        if not rolled_back:
            raise ResumeAmbiguous("the reservation could not be rolled back")

    async def _publish_successor(self, admitted: AdmittedTurn) -> None:
        """``turn.started`` first (its payload is recovery-clean), then clear the private
        metadata: a failed publication leaves the marker for start-up recovery."""
        await failpoints.hit("events.publish")
        await self.events.publish(Event("turn.started", _turn_data(admitted)))
        await failpoints.hit("resume.before_clear")
        async with write_tx(self.engine) as conn:
            await reservations.publish(conn, admitted.turn_id)

    async def turn_complete(
        self, session_id: str, turn_id: str, generation: int, status: str
    ) -> bool:
        """The ready event. Applies only to the turn and generation it names; a stale event
        (an older generation, or a turn no longer current) changes nothing."""
        self.watchdog.on_activity(session_id)
        async with write_tx(self.engine) as conn:
            completed = (
                await conn.execute(
                    update(turns)
                    .where(
                        turns.c.id == turn_id,
                        turns.c.session_id == session_id,
                        turns.c.prompt_generation == generation,
                        turns.c.completed_at.is_(None),
                    )
                    .values(completed_at=utcnow())
                    .returning(turns.c.task_id)
                )
            ).first()
        if completed is None:
            return False
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
        ids = {"session_id": session_id, "task_id": completed.task_id}
        if changed:
            await self.events.publish(Event("session.updated", ids))
        await self.events.publish(
            Event("turn.completed", {**ids, "turn_id": turn_id, "status": status})
        )
        if status == "completed":
            await self._advance_workflow(completed.task_id)
        return True

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
        self, conn: AsyncConnection, session_id: str, turn_id: str, generation: int
    ) -> AdmittedTurn:
        """The callback's turn, if it is still the session's current turn and generation."""
        row = (
            await conn.execute(
                select(
                    sessions.c.task_id,
                    sessions.c.state,
                    sessions.c.prompt_generation,
                    current_turn_id(literal(session_id)),
                ).where(sessions.c.id == session_id)
            )
        ).first()
        if row is None:
            raise NotFound("no such session")
        task_id, state, current_generation, current = row
        if (
            state in TERMINAL_SESSION_STATES
            or current != turn_id
            or current_generation != generation
        ):
            raise TurnNotCurrent("that turn is no longer the session's current turn")
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


def _turn_data(turn: AdmittedTurn) -> dict[str, Any]:
    """A public turn event's payload: identity only, never private dispatch fields."""
    return {"session_id": turn.session_id, "task_id": turn.task_id, "turn_id": turn.turn_id}
