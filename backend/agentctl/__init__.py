"""The backend's side of the agent protocol (``docs/agent-protocol.md``) and the mock agent.

``client.AgentctlClient`` dispatches prompts and tells the caller, through distinct exceptions,
whether a failed dispatch is safe to roll back. ``backend.agentctl.mock`` is a separate process
that speaks the same protocol for the run command and the tests.
"""

from __future__ import annotations

from backend.agentctl.client import AgentctlClient, PromptRequest
from backend.agentctl.errors import (
    AgentctlError,
    AgentctlUnavailable,
    PromptDispatchError,
    PromptNotAcknowledged,
    PromptRejected,
    PromptTransportError,
)

__all__ = [
    "AgentctlClient",
    "AgentctlError",
    "AgentctlUnavailable",
    "PromptDispatchError",
    "PromptNotAcknowledged",
    "PromptRejected",
    "PromptRequest",
    "PromptTransportError",
]
