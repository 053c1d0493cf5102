"""Agent profiles: how to launch an ACP agent for a session.

Each session names its profile (``agent_profile``). Built in: ``mock`` (the project's own ACP
agent, ``backend/agents/mock_acp.py``, running the mock scripts) and the documented real
agents ``claude-code`` and ``codex`` (Zed's ACP adapters, run with ``npx``; they need the
user's own credentials and network, so nothing starts them but a session that asks for them).
More profiles, or overrides, come from a JSON file (``KANDEV_AGENT_PROFILES``):
``{"name": {"command": [...], "env": {...}, "cwd": "..."}}``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: Where the mock ACP agent appends every prompt it reads (JSON lines), for tests to count.
MOCK_RECORD_ENV = "KANDEV_MOCK_RECORD"
MOCK = "mock"
#: What a profile may be called (it is stored on the session and shown in the UI).
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True, slots=True)
class AgentProfile:
    name: str
    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    #: The agent's working directory (``None``: the backend's).
    cwd: str | None = None


BUILT_IN: dict[str, AgentProfile] = {
    MOCK: AgentProfile(MOCK, (sys.executable, "-m", "backend.agents.mock_acp")),
    "claude-code": AgentProfile("claude-code", ("npx", "-y", "@zed-industries/claude-code-acp")),
    "codex": AgentProfile("codex", ("npx", "-y", "@zed-industries/codex-acp")),
}


def load_profiles(
    path: str | None = None, *, mock_record: str | None = None
) -> dict[str, AgentProfile]:
    """The built-in profiles, overlaid with those of the JSON file at ``path``; the mock
    records its prompts at ``mock_record`` when given."""
    profiles = dict(BUILT_IN)
    if mock_record:
        mock = profiles[MOCK]
        profiles[MOCK] = AgentProfile(
            MOCK, mock.command, {**mock.env, MOCK_RECORD_ENV: mock_record}, mock.cwd
        )
    if not path:
        return profiles
    for name, spec in json.loads(Path(path).read_text()).items():
        if not NAME_PATTERN.match(name):
            raise ValueError(f"agent profile {name!r}: names are letters, digits, '.', '_', '-'")
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
