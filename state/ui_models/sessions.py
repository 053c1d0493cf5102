"""Session states (busy, ended, their labels and colours) and the session tabs; a task's
session list is only ever replaced by one read at the same or a newer revision."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from state.activation.models import Revision
from state.ui_models.labels import as_text, state_label

#: Session states in which the agent is working on a turn (the composer waits).
BUSY_SESSION_STATES = frozenset({"CREATED", "STARTING", "RUNNING"})
#: Session states that take no more prompts.
ENDED_SESSION_STATES = frozenset({"COMPLETED", "FAILED", "CANCELLED"})

_SESSION_STATE_COLORS = {
    "CREATED": "gray",
    "STARTING": "blue",
    "RUNNING": "blue",
    "IDLE": "gray",
    "WAITING_FOR_INPUT": "amber",
    "COMPLETED": "green",
    "FAILED": "red",
    "CANCELLED": "gray",
}

_SESSION_STATE_LABELS = {"WAITING_FOR_INPUT": "Needs input", "IDLE": "Idle"}


def session_state_label(state: str) -> str:
    return _SESSION_STATE_LABELS.get(state, state_label(state))


@dataclass
class SessionTab:
    id: str
    label: str
    state: str
    state_label: str
    state_color: str
    is_primary: bool
    pending_action: str = ""


def session_tabs(
    sessions: Iterable[Mapping[str, Any]], pending: Mapping[str, str | None]
) -> list[SessionTab]:
    """Tabs in creation order: "Primary" for the primary session, "Session N" for the others
    (N = position in creation order). ``pending`` maps session ids to the projection store's
    newest ``pending_action``; a session missing from it shows its own payload value."""
    ordered = sorted(sessions, key=lambda s: (as_text(s.get("created_at")), s["id"]))
    tabs = []
    for number, session in enumerate(ordered, 1):
        state = as_text(session.get("state"))
        if session["id"] in pending:
            action = pending[session["id"]] or ""
        else:
            action = as_text(session.get("pending_action"))
        tabs.append(
            SessionTab(
                id=session["id"],
                label="Primary" if session.get("is_primary") is True else f"Session {number}",
                state=state,
                state_label=session_state_label(state),
                state_color=_SESSION_STATE_COLORS.get(state, "gray"),
                is_primary=session.get("is_primary") is True,
                pending_action=action,
            )
        )
    return tabs


def list_revision(sessions: Iterable[Mapping[str, Any]]) -> Revision | None:
    """The revision a task-session list was read at (every row carries the one reserved before
    the read); ``None`` for an empty or unorderable list."""
    revisions = [Revision.parse_optional(s.get("pending_action_revision")) for s in sessions]
    known = [r for r in revisions if r is not None]
    return max(known) if known else None


def is_newer_list(held: Iterable[Mapping[str, Any]], fresh: Iterable[Mapping[str, Any]]) -> bool:
    """Whether ``fresh`` may replace ``held`` as a task's session list: reads finish in any
    order, and an older snapshot (e.g. a session still ``RUNNING``) must not replace a newer
    one. Sessions are never deleted, so an empty list never replaces a revisioned one."""
    held_rev = list_revision(held)
    if held_rev is None:
        return True
    fresh_rev = list_revision(fresh)
    return fresh_rev is not None and fresh_rev >= held_rev
