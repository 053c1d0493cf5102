"""What the orchestrator needs of an agent executor, and the public shape of turn events."""

from __future__ import annotations

from typing import Any

from backend.agentctl.client import PromptRequest
from backend.orchestrator.admission import AdmittedTurn


class PromptDispatcher:
    """An agent executor (``AgentctlClient`` provides it): returns once the prompt is
    acknowledged; raises ``PromptRejected`` / ``PromptNotAcknowledged`` when it certainly was
    not taken, another ``PromptDispatchError`` when it may have been."""

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:  # pragma: no cover
        raise NotImplementedError


def turn_data(turn: AdmittedTurn) -> dict[str, Any]:
    """A public turn event's payload: identity only, never private dispatch fields."""
    return {"session_id": turn.session_id, "task_id": turn.task_id, "turn_id": turn.turn_id}
