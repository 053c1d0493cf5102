"""The active task's session panel: its tabs, the open session's transcript, the start form,
and the payloads they are built from. A read applies only to the view it was made for
(:class:`ViewRef`): events that arrived meanwhile are replayed over it, never lost (S05).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import reflex as rx

from state.app_state import AppState
from state.ui_models import (
    BUSY_SESSION_STATES,
    ENDED_SESSION_STATES,
    MessageItem,
    SessionTab,
    message_items,
    remove_message,
    session_tabs,
    transcript_order,
    upsert_message,
)


@dataclass(frozen=True, slots=True)
class ViewRef:
    """What a client showed when it started a read, so a late result applies only to that.

    ``mark`` is the number of transcript events applied when the read began (later ones are
    replayed over the read's rows); ``discovery`` counts the events that asked for pending
    discovery: a bundle read that began before the latest of them is stale (a newer discovery
    read follows it and applies instead).
    """

    task_id: str
    session_id: str
    generation: int
    mark: int = 0
    discovery: int = 0


class SessionViewState(AppState):
    """Tabs, transcript and start form of the active task."""

    view_loading: bool = False
    chat_notice: str = ""
    start_open: bool = False
    start_busy: bool = False
    start_error: str = ""
    #: The agents a new session may run, and the start form's preselected one.
    agent_profiles: list[str] = []  # noqa: RUF012 - how Reflex declares state vars
    agent_profile: str = ""

    # -- payloads (server only) ---------------------------------------------------------------
    _tab_sessions: list[dict[str, Any]] = []  # noqa: RUF012 - how Reflex declares state vars
    #: Session lists by task, for clean activations (no forced load).
    _session_cache: dict[str, list[dict[str, Any]]] = {}  # noqa: RUF012
    _messages: list[dict[str, Any]] = []  # noqa: RUF012
    _bundles: list[dict[str, Any]] = []  # noqa: RUF012
    #: Bumped whenever the open view changes: a read of an older view is dropped.
    _view_gen: int = 0
    _event_seq: int = 0
    _event_log: list[tuple[int, str, dict[str, Any]]] = []  # noqa: RUF012
    _discovery_seq: int = 0

    @rx.var
    def tabs(self) -> list[SessionTab]:
        return session_tabs(self._tab_sessions, self.pending_map())

    @rx.var
    def messages(self) -> list[MessageItem]:
        active = frozenset(b["pending_id"] for b in self._bundles)
        permission = self.pending_map().get(self.active_session_id) == "permission"
        return message_items(self._messages, active, permission_pending=permission)

    @rx.var
    def session_state(self) -> str:
        return next((t.state for t in self.tabs if t.id == self.active_session_id), "")

    @rx.var
    def session_busy(self) -> bool:
        return self.session_state in BUSY_SESSION_STATES

    @rx.var
    def session_ended(self) -> bool:
        return self.session_state in ENDED_SESSION_STATES

    # -- helpers (not event handlers) ---------------------------------------------------------

    def pending_map(self) -> dict[str, str | None]:
        """The pending action of each listed session the projection store knows."""
        flow = self.activation()
        return {
            s["id"]: flow.projections.pending_action(s["id"])
            for s in self._tab_sessions
            if s["id"] in flow.projections
        }

    def view_ref(self) -> ViewRef:
        return ViewRef(
            self.active_task_id,
            self.active_session_id,
            self._view_gen,
            self._event_seq,
            self._discovery_seq,
        )

    def shows(self, view: ViewRef) -> bool:
        return view.generation == self._view_gen and view.session_id == self.active_session_id

    def apply_view_reads(
        self,
        view: ViewRef,
        messages: list[dict[str, Any]] | None,
        bundles: list[dict[str, Any]] | None,
    ) -> bool:
        """Apply a transcript and/or bundle read of ``view``; ``False`` when the view is gone.

        Reads and live events interleave: transcript events applied after the read began are
        replayed over its rows (a message that arrived meanwhile is not lost, a deleted one not
        revived), and a bundle read older than the latest discovery-triggering event is dropped
        (the newer discovery read decides)."""
        if not self.shows(view):
            return False
        if messages is not None:
            rows = transcript_order(messages)
            for seq, kind, message in self._event_log:
                if seq <= view.mark:
                    continue
                if kind == "session.message.deleted":
                    rows = remove_message(rows, message.get("id", ""))
                else:
                    rows = upsert_message(rows, message)
            self._messages = rows
        if bundles is not None and view.discovery == self._discovery_seq:
            self._bundles = bundles
        return True

    def release(self) -> None:
        """Let go of the outgoing session's transcript (a newer view begins)."""
        self._view_gen += 1
        self._messages = []
        self._bundles = []
        self._event_log = []
        self.chat_notice = ""
        self.view_loading = False

    def set_agent_choices(self, profiles: list[str], default: str) -> None:
        self.agent_profiles = profiles
        self.agent_profile = default

    def begin_start(self, prompt_text: str) -> bool:
        """The start form was submitted: ``False`` when it is busy or has no prompt."""
        if self.start_busy:
            return False
        if not prompt_text:
            self.start_error = "Write the first prompt for the agent."
            return False
        self.start_busy = True
        self.start_error = ""
        return True

    def end_start(self, error: str = "") -> None:
        """The start request ended: the form closes, or stays open with the error."""
        self.start_busy = False
        self.start_error = error
        if not error:
            self.start_open = False

    # -- event handlers of this panel only ------------------------------------------------------

    @rx.event
    def toggle_start(self) -> None:
        self.start_open = not self.start_open
        self.start_error = ""

    @rx.event
    def set_start_open(self, value: bool) -> None:
        self.start_open = value
        self.start_error = ""

    @rx.event
    def dismiss_notice(self) -> None:
        self.chat_notice = ""
