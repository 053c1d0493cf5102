"""The orchestrator: sessions, prompts and agent dispatch, composed with the agent's
callbacks (``live.py``: clarification requests; ``completion.py``: ready events).

Every state change is a conditional statement checked against the rule (current turn, prompt
generation, non-terminal session), so late or duplicated agent callbacks are refused instead of
applied to a newer turn. Events are published after commit and only for rows a statement
actually changed. Imports run one way: this module → {admission, reservations, resume,
watchdog, live, completion}; none of them imports it (see docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Sequence
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.authority.sql import TERMINAL_STATES
from backend.clarifications.store import Question, expire_current_turn
from backend.clarifications.waiters import WaiterOutcome, WaiterRegistry
from backend.clock import utcnow
from backend.db.bounded import BOUNDED_WRITE_S, bounded
from backend.db.engine import read_tx, write_tx
from backend.db.tables import sessions, tasks
from backend.errors import AgentUnavailable, Conflict, NotFound
from backend.events import Event
from backend.events.publisher import EventPublisher
from backend.ids import new_id
from backend.orchestrator.admission import (
    AdmittedTurn,
    acknowledge,
    admit_prompt,
    insert_message,
    require_current,
)
from backend.orchestrator.completion import TurnCompletion
from backend.orchestrator.dispatch import (
    AgentChannel,
    PromptDispatcher,
    PromptDispatchError,
    turn_data,
)
from backend.orchestrator.live import ClarificationResult, LiveClarifications
from backend.orchestrator.resume import DetachedResume
from backend.orchestrator.watchdog import PrimaryAnswerWatchdog
from backend.vocabulary import TERMINAL_SESSION_STATES, SessionState

log = logging.getLogger(__name__)


__all__ = ["ClarificationResult", "Orchestrator", "PromptDispatcher"]


class Orchestrator:
    def __init__(
        self,
        engine: AsyncEngine,
        dispatcher: PromptDispatcher,
        events: EventPublisher,
        waiters: WaiterRegistry,
        channel: AgentChannel,
        watchdog_delay_s: float = 30.0,
        ack_timeout_s: float = 10.0,
    ) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.events = events
        self.waiters = waiters
        self.channel = channel
        #: A dispatch plus the settling of its outcome: the acknowledgement deadline and a few
        #: bounded writes.
        self.dispatch_bound_s = ack_timeout_s + 3 * BOUNDED_WRITE_S
        #: How long a ready event waits for an overlapping reservation to resolve.
        self.reservation_wait_s = ack_timeout_s + 2 * BOUNDED_WRITE_S
        self.resume = DetachedResume(
            engine, dispatcher, events, channel, self.turn_complete, self.dispatch_bound_s
        )
        self.watchdog = PrimaryAnswerWatchdog(engine, self.resume.run, watchdog_delay_s)
        self.completion = TurnCompletion(
            engine,
            events,
            waiters,
            on_activity=self.watchdog.on_activity,
            resolution_of=self.resume.resolution_of,
            reservation_wait_s=self.reservation_wait_s,
        )
        self.live = LiveClarifications(engine, events, waiters, self.completion, self.watchdog)

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
                return admitted, await insert_message(conn, admitted, "user", prompt)

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
                return admitted, await insert_message(conn, admitted, "user", content)

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
        request = self.channel.prompt(admitted, content)
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
            admitted = await require_current(conn, session_id, turn_id, generation)
            row = await insert_message(conn, admitted, "agent", content)
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
        """The agent asks: held open as the live waiter (``live.py``)."""
        return await self.live.ask(
            session_id, turn_id, generation, questions, wait_seconds, agent_gone
        )

    async def cancel_live(self, bundle_id: str) -> None:
        """Cancel a request held by this process's waiter store (``live.py``)."""
        await self.live.cancel(bundle_id)

    async def turn_complete(
        self, session_id: str, turn_id: str, generation: int, status: str
    ) -> bool:
        """The ready event (``completion.py``); ``True`` when it applied."""
        return await self.completion.turn_complete(session_id, turn_id, generation, status)

    async def agent_session_opened(self, session_id: str, agent_session_id: str) -> None:
        """Keep the agent's own conversation id, so a restarted backend resumes it (ACP
        ``session/load``) rather than starting the agent afresh."""
        async with write_tx(self.engine) as conn:
            await conn.execute(
                update(sessions)
                .where(sessions.c.id == session_id)
                .values(agent_session_id=agent_session_id)
            )
