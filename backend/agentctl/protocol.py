"""Paths and literals of the agent protocol, shared by the client and the mock agent.

Kept in one place so the two sides cannot drift apart; the prose is ``docs/agent-protocol.md``.
"""

from __future__ import annotations

from typing import Final

PROMPTS_PATH: Final = "/v1/prompts"
HEALTH_PATH: Final = "/v1/health"
PROMPT_FAILPOINT: Final = "agentctl.prompt"
FAILPOINT_PATH: Final = f"/v1/failpoints/{PROMPT_FAILPOINT}"

#: Failpoint actions the mock agent understands for ``agentctl.prompt``.
FAILPOINT_ACTIONS: Final = frozenset({"reject", "timeout", "accept_then_fail"})


def messages_path(session_id: str) -> str:
    return f"/api/v1/_agent/sessions/{session_id}/messages"


def clarifications_path(session_id: str) -> str:
    return f"/api/v1/_agent/sessions/{session_id}/clarifications"


def complete_path(session_id: str, turn_id: str) -> str:
    return f"/api/v1/_agent/sessions/{session_id}/turns/{turn_id}/complete"
