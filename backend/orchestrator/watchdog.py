"""The primary-answer watchdog: a live answer the agent never acted on is not lost.

After a live waiter confirmed an answer and handed it to the agent, the agent should go on
with the same turn. If it shows no sign of that within ``delay_s`` (the response may have been
lost, or the agent died), the watchdog dispatches the answer as a new prompt instead. It
carries the clarification's turn id and generation and revalidates them twice: before the
fallback (preflight) and inside the serialized prompt admission, so a stale answer can never
be dispatched into a successor turn (S25). It is an ordinary cancellable task: session activity
or shutdown cancels it, and the cancellation reaches whatever call it is in (S26).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, exists, literal, not_, select

from backend import failpoints
from backend.authority.sql import TERMINAL_STATES, current_turn_id, messages, sessions, turns
from backend.db.engine import read_tx

if TYPE_CHECKING:
    from backend.orchestrator.service import Orchestrator

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AnswerExpectation:
    """The turn a live answer belongs to, and when the agent received it."""

    session_id: str
    turn_id: str
    prompt_generation: int
    since: datetime

    def still_undelivered(self) -> Any:
        """SQL: the turn is still current at this generation and the agent has shown no
        activity in it since ``since`` (no agent message, not completed)."""
        agent_spoke = exists().where(
            messages.c.turn_id == self.turn_id,
            messages.c.author == "agent",
            messages.c.created_at > self.since,
        )
        turn_open = exists().where(turns.c.id == self.turn_id, turns.c.completed_at.is_(None))
        return and_(
            sessions.c.id == self.session_id,
            sessions.c.prompt_generation == self.prompt_generation,
            sessions.c.state.not_in(TERMINAL_STATES),
            current_turn_id(literal(self.session_id)) == self.turn_id,
            turn_open,
            not_(agent_spoke),
        )


class PrimaryAnswerWatchdog:
    def __init__(self, orchestrator: Orchestrator, delay_s: float) -> None:
        self.orchestrator = orchestrator
        self.delay_s = delay_s
        self._tasks: dict[str, set[asyncio.Task[None]]] = {}

    def arm(
        self, expectation: AnswerExpectation, pending_id: str, answers: Sequence[dict[str, Any]]
    ) -> asyncio.Task[None]:
        task = asyncio.create_task(self._run(expectation, pending_id, list(answers)))
        tasks = self._tasks.setdefault(expectation.session_id, set())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    def on_activity(self, session_id: str) -> None:
        """The agent is alive in this session: no fallback needed."""
        for task in self._tasks.pop(session_id, set()):
            task.cancel()

    async def shutdown(self) -> None:
        tasks = [t for group in self._tasks.values() for t in group]
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run(
        self, expectation: AnswerExpectation, pending_id: str, answers: list[dict[str, Any]]
    ) -> None:
        await asyncio.sleep(self.delay_s)
        async with read_tx(self.orchestrator.engine) as conn:
            preflight = (
                await conn.execute(select(sessions.c.id).where(expectation.still_undelivered()))
            ).first()
        if preflight is None:
            return
        await failpoints.hit("watchdog.before_admission")
        answer = {"pending_id": pending_id, "rejected": False, "answers": answers}
        try:
            await self.orchestrator.resume.run(
                expectation.session_id,
                expectation.turn_id,
                pending_id,
                [a["message_id"] for a in answers],
                answer,
                expect=expectation,
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.info("watchdog fallback for %s not dispatched: %r", pending_id, error)
