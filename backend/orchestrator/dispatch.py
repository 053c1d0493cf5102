"""What the orchestrator needs of an agent executor: the prompt it sends, the exceptions that
say whether a failed send may have reached the agent, the sink for agent output, and the
public shape of turn events."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from backend.agent_credentials import AgentCredentials
from backend.orchestrator.admission import AdmittedTurn

if TYPE_CHECKING:
    from backend.clarifications.store import Question
    from backend.orchestrator.live import ClarificationResult


@dataclass(frozen=True, slots=True)
class PromptRequest:
    """One prompt for an executor to send: ``agent_token`` is the session's credential for
    the agent-facing routes and the MCP server, ``answer`` is set when resuming a detached
    bundle."""

    session_id: str
    turn_id: str
    prompt_generation: int
    content: str
    callback_url: str
    agent_token: str
    answer: dict[str, Any] | None = None
    #: The session's agent profile: which agent runs the prompt.
    agent_profile: str = "mock"
    #: The agent's own id for the conversation (ACP ``sessionId``), once it has one.
    agent_session_id: str | None = None
    #: The worker running the session's agent when the turn was admitted (several workers).
    agent_worker: str | None = None


class PromptDispatchError(Exception):
    """A prompt was not acknowledged. ``maybe_delivered`` answers the question the spec's
    at-most-once boundary (S17, S18, S34) turns on: *could the agent be running it?* Messages
    are one-liners for logs and API errors, never tracebacks."""

    maybe_delivered: bool

    def __init__(self, message: str, *, maybe_delivered: bool) -> None:
        super().__init__(message)
        self.maybe_delivered = maybe_delivered


class PromptRejected(PromptDispatchError):
    """The prompt certainly was not taken (refused, or the agent could not start): nothing
    runs; rolling back the reserved turn and restoring the answer is safe."""

    def __init__(self, message: str = "agent rejected the prompt") -> None:
        super().__init__(message, maybe_delivered=False)


class PromptNotAcknowledged(PromptDispatchError):
    """No acknowledgement within the deadline: failed acceptance (spec S34). With
    ``maybe_delivered=True`` the caller must keep the ambiguity in mind (never redispatch
    blindly)."""


class PromptTransportError(PromptDispatchError):
    """The exchange broke after the prompt was sent: the agent may be running it (never
    safe to roll back as if nothing happened)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, maybe_delivered=True)


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

    async def agent_clarification(
        self,
        session_id: str,
        turn_id: str,
        generation: int,
        questions: Sequence[Question],
        wait_seconds: float,
        agent_gone: Awaitable[Any],
    ) -> ClarificationResult:
        """The agent asks; held open as the live waiter until an outcome (``live.py``)."""


class PromptDispatcher:
    """An agent executor (``AcpExecutor`` provides it): returns once the prompt is
    acknowledged; raises ``PromptRejected`` / ``PromptNotAcknowledged`` when it certainly was
    not taken, another ``PromptDispatchError`` when it may have been."""

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:  # pragma: no cover
        raise NotImplementedError

    def attach(self, sink: AgentSink) -> None:
        """Executors that run agents in-process (ACP) deliver their output to ``sink``;
        an executor whose agents call the agent-facing routes back ignores it."""


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
            agent_worker=turn.agent_worker,
        )


def turn_data(turn: AdmittedTurn) -> dict[str, Any]:
    """A public turn event's payload: identity only, never private dispatch fields."""
    return {"session_id": turn.session_id, "task_id": turn.task_id, "turn_id": turn.turn_id}
