"""What a live answer expects of the agent: the watchdog's preflight and the prompt admission
both revalidate it, so a stale answer is never dispatched into a successor turn (S25)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, literal, not_

from backend.authority.sql import TERMINAL_STATES, current_turn_id
from backend.db.tables import messages, sessions, turns


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
