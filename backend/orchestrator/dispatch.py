"""What the orchestrator needs of an agent executor, and the public shape of turn events."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from backend.agent_credentials import AgentCredentials
from backend.agentctl.client import PromptRequest
from backend.orchestrator.admission import AdmittedTurn


class AgentSink(Protocol):
    """Where an in-process executor delivers agent output (the orchestrator): the same calls
    the agent protocol's HTTP callbacks make."""

    async def agent_message(
        self, session_id: str, turn_id: str, generation: int, content: str
    ) -> Any: ...

    async def turn_complete(
        self, session_id: str, turn_id: str, generation: int, status: str
    ) -> bool: ...

    async def agent_session_opened(self, session_id: str, agent_session_id: str) -> None:
        """The agent opened a conversation under its own id (kept for ``session/load``)."""


class PromptDispatcher:
    """An agent executor (``AgentctlClient`` provides it): returns once the prompt is
    acknowledged; raises ``PromptRejected`` / ``PromptNotAcknowledged`` when it certainly was
    not taken, another ``PromptDispatchError`` when it may have been."""

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:  # pragma: no cover
        raise NotImplementedError

    def attach(self, sink: AgentSink) -> None:
        """Executors that run agents in-process (ACP) deliver their output to ``sink``;
        executors whose agents call back over HTTP ignore it."""


@dataclass(frozen=True, slots=True)
class AgentChannel:
    """How a dispatched prompt tells the agent where to call back, and with which credential
    (the session's own: ``backend/agent_credentials.py``)."""

    callback_url: str
    credentials: AgentCredentials

    def prompt(
        self, turn: AdmittedTurn, content: str, answer: dict[str, Any] | None = None
    ) -> PromptRequest:
        if turn.agent_profile is None:
            raise ValueError("a prompt needs its admitted turn's agent profile")
        return PromptRequest(
            session_id=turn.session_id,
            turn_id=turn.turn_id,
            prompt_generation=turn.prompt_generation,
            content=content,
            callback_url=self.callback_url,
            agent_token=self.credentials.token_for(turn.session_id),
            answer=answer,
            agent_profile=turn.agent_profile,
            agent_session_id=turn.agent_session_id,
        )


def turn_data(turn: AdmittedTurn) -> dict[str, Any]:
    """A public turn event's payload: identity only, never private dispatch fields."""
    return {"session_id": turn.session_id, "task_id": turn.task_id, "turn_id": turn.turn_id}
