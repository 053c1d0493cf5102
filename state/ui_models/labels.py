"""Task-state labels, colours and pending hints, and the tolerant readers of payload fields:
a field of the wrong type reads as its default (``""``, ``None``), never as an error."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Colour per task state (Radix colour names); anything else is gray.
TASK_STATE_COLORS = {
    "TODO": "gray",
    "BACKLOG": "gray",
    "IN_PROGRESS": "blue",
    "RUNNING": "blue",
    "REVIEW": "amber",
    "WAITING_FOR_INPUT": "amber",
    "DONE": "green",
    "COMPLETED": "green",
    "FAILED": "red",
    "CANCELLED": "red",
}

#: Tooltip of the pending-question icon per ``pending_action``.
PENDING_HINTS = {
    "clarification": "The agent asked a question and waits for your answer",
    "permission": "The agent asks for permission and waits for your answer",
}


def state_label(state: str) -> str:
    """``IN_PROGRESS`` -> ``In progress``."""
    return state.replace("_", " ").strip().capitalize()


def as_text(raw: object, default: str = "") -> str:
    """A payload field that should be a string; anything else reads as ``default``."""
    return raw if isinstance(raw, str) else default


def pending_of_task(task: Mapping[str, Any]) -> str:
    """The task-level ``pending_action`` the row advertises (``""`` for none): the status
    summary's, or the legacy top-level field when the summary is null."""
    summary = task.get("status_summary")
    raw = (
        summary.get("pending_action")
        if isinstance(summary, Mapping)
        else task.get("pending_action")
    )
    return raw if isinstance(raw, str) else ""


def summary_revision(task: Mapping[str, Any]) -> int | None:
    summary = task.get("status_summary")
    if not isinstance(summary, Mapping):
        return None
    revision = summary.get("revision")
    return revision if isinstance(revision, int) and not isinstance(revision, bool) else None
