"""Agent profiles: how to launch an ACP agent for a session.

Built in: ``mock-acp`` (the project's own ACP agent, ``backend/agents/mock_acp.py``) and the
documented real agents ``claude-code`` and ``codex`` (Zed's ACP adapters, run with ``npx``;
they need the user's own credentials and network, so nothing starts them but a session that
asks for them). More profiles, or overrides, come from a JSON file (``KANDEV_AGENT_PROFILES``):
``{"name": {"command": [...], "env": {...}, "cwd": "..."}}``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Where the mock ACP agent appends every prompt it reads (JSON lines), for tests to count.
MOCK_RECORD_ENV = "KANDEV_MOCK_RECORD"


@dataclass(frozen=True, slots=True)
class AgentProfile:
    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    #: The agent's working directory (``None``: the backend's).
    cwd: str | None = None


BUILT_IN: dict[str, AgentProfile] = {
    "mock-acp": AgentProfile("mock-acp", (sys.executable, "-m", "backend.agents.mock_acp")),
    "claude-code": AgentProfile("claude-code", ("npx", "-y", "@zed-industries/claude-code-acp")),
    "codex": AgentProfile("codex", ("npx", "-y", "@zed-industries/codex-acp")),
}


class UnknownProfile(KeyError):
    pass


def load_profiles(path: str | None = None) -> dict[str, AgentProfile]:
    """The built-in profiles, overlaid with those of the JSON file at ``path``."""
    profiles = dict(BUILT_IN)
    if not path:
        return profiles
    for name, spec in json.loads(Path(path).read_text()).items():
        command = spec.get("command")
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(c, str) for c in command)
        ):
            raise ValueError(
                f"agent profile {name!r}: 'command' must be a non-empty list of strings"
            )
        env = spec.get("env") or {}
        profiles[name] = AgentProfile(name, tuple(command), dict(env), spec.get("cwd"))
    return profiles
