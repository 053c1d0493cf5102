"""The mock agent's one failpoint, ``agentctl.prompt``: faults the backend must survive.

Set at start-up from ``KANDEV_MOCK_AGENT_FAILPOINTS="agentctl.prompt=ACTION[:COUNT]"`` (entries
separated by ``;``) or at run time through ``PUT /v1/failpoints/agentctl.prompt``. ``COUNT`` is
how many prompts it applies to; without it the fault stays until cleared.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.agentctl.protocol import FAILPOINT_ACTIONS, PROMPT_FAILPOINT

ENV_VAR = "KANDEV_MOCK_AGENT_FAILPOINTS"


class FailpointSpecError(ValueError):
    """A failpoint setting the mock agent does not understand (refused, never guessed)."""


@dataclass(slots=True)
class PromptFailpoint:
    """The armed action and how many more prompts it hits (``None``: until cleared)."""

    action: str | None = None
    remaining: int | None = None

    def arm(self, action: str, count: int | None = None) -> None:
        if action not in FAILPOINT_ACTIONS:
            raise FailpointSpecError(f"unknown action {action!r}")
        if count is not None and count < 1:
            raise FailpointSpecError("count must be a positive integer")
        self.action, self.remaining = action, count

    def clear(self) -> None:
        self.action, self.remaining = None, None

    def take(self) -> str | None:
        """The action for the prompt arriving now, using up one count."""
        action = self.action
        if action is not None and self.remaining is not None:
            self.remaining -= 1
            if self.remaining <= 0:
                self.clear()
        return action


def from_env_spec(spec: str) -> PromptFailpoint:
    """Parse ``name=action[:count];...``; only ``agentctl.prompt`` exists here."""
    failpoint = PromptFailpoint()
    for entry in filter(None, (part.strip() for part in spec.split(";"))):
        name, sep, value = entry.partition("=")
        if not sep or name.strip() != PROMPT_FAILPOINT:
            raise FailpointSpecError(f"unknown failpoint setting {entry!r}")
        action, _, count = value.strip().partition(":")
        if count and not (count.isascii() and count.isdigit()):
            raise FailpointSpecError(f"bad count in {entry!r}")
        failpoint.arm(action.strip(), int(count) if count else None)
    return failpoint
