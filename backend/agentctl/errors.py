"""Why a prompt dispatch failed, split by what the caller may safely do next.

The spec's at-most-once boundary (S17, S18, S34) depends on one question: *could the agent be
running this prompt?* Each exception answers it:

- ``PromptRejected``: no. The agent answered 409; nothing runs. Rolling back the reserved turn
  and restoring the answer is safe.
- ``PromptNotAcknowledged``: no acknowledgement within the bounded wait, or no connection.
  The spec treats this as failed acceptance (S34). ``maybe_delivered`` says whether the
  request body may have reached the agent: ``False`` (connect failure) means it certainly did
  not; ``True`` means the caller must keep the ambiguity in mind (for example never redispatch
  blindly after a crash).
- ``PromptTransportError``: the request was sent and the exchange broke afterwards (dropped
  connection, malformed or unexpected answer). The agent may well be running the prompt:
  ``maybe_delivered`` is always ``True``; this is the ambiguous case, never safe to roll back
  as if nothing happened.

Messages are short one-liners meant for logs and API errors; they never carry tracebacks.
"""

from __future__ import annotations


class AgentctlError(Exception):
    """Any failure talking to agentctl."""


class AgentctlUnavailable(AgentctlError):
    """A non-prompt call (record, failpoints) failed; these calls have no side effects to fear."""


class PromptDispatchError(AgentctlError):
    """A prompt was not acknowledged with 202. ``maybe_delivered``: could the agent run it?"""

    maybe_delivered: bool

    def __init__(self, message: str, *, maybe_delivered: bool) -> None:
        super().__init__(message)
        self.maybe_delivered = maybe_delivered


class PromptRejected(PromptDispatchError):
    """409: the agent refused the prompt synchronously; nothing runs, rollback is safe."""

    def __init__(self, message: str = "agent rejected the prompt") -> None:
        super().__init__(message, maybe_delivered=False)


class PromptNotAcknowledged(PromptDispatchError):
    """No 202 within the deadline, or no connection: failed acceptance (spec S34)."""


class PromptTransportError(PromptDispatchError):
    """The exchange broke after the request was sent: the agent may be running the prompt."""

    status_code: int | None

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message, maybe_delivered=True)
        self.status_code = status_code
