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
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.db.engine import read_tx
from backend.db.tables import sessions
from backend.orchestrator.expectation import AnswerExpectation

log = logging.getLogger(__name__)

#: Dispatches an answer as a new prompt: ``(session_id, turn_id, pending_id, message_ids,
#: answer, expect=...)`` — the detached resume's ``run``.
ResumeCall = Callable[..., Awaitable[Any]]


class PrimaryAnswerWatchdog:
    def __init__(self, engine: AsyncEngine, resume: ResumeCall, delay_s: float) -> None:
        self.engine = engine
        self.resume = resume
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
        async with read_tx(self.engine) as conn:
            preflight = (
                await conn.execute(select(sessions.c.id).where(expectation.still_undelivered()))
            ).first()
        if preflight is None:
            return
        await failpoints.hit("watchdog.before_admission")
        answer = {"pending_id": pending_id, "rejected": False, "answers": answers}
        try:
            await self.resume(
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
