"""What a live bus event makes one client re-read; event payloads only say what to re-read,
never what a bundle or summary now is."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from backend.events.bus import OVERFLOW
from state.ui_models.labels import as_text

MESSAGE_EVENTS = frozenset(
    {"session.message.added", "session.message.updated", "session.message.deleted"}
)
TURN_EVENTS = frozenset({"turn.started", "turn.completed"})
#: The watcher fell so far behind that the bus dropped its queued events: everything shown
#: is re-read.
OVERFLOW_EVENT = OVERFLOW


@dataclass
class EventPlan:
    """What a batch of bus events asks of one client's view.

    Filled by :func:`plan_event`; the Reflex state applies the in-memory parts at once
    (projection, summaries, transcript rows) and performs the reads afterwards.
    """

    #: Tasks to re-read (created, moved, deleted, summary invalidated).
    reload_tasks: set[str] = field(default_factory=set)
    #: The active task's session list changed (states, new sessions).
    reload_sessions: bool = False
    #: The active session's active bundles may have changed (pending discovery).
    discover_bundles: bool = False
    #: The active session's transcript must be re-read (a change the payload cannot carry).
    reload_messages: bool = False
    #: Tasks whose cached session lists are stale (a clean activation must not reuse them).
    stale_session_lists: set[str] = field(default_factory=set)

    def merge(self, other: EventPlan) -> None:
        self.reload_tasks |= other.reload_tasks
        self.reload_sessions |= other.reload_sessions
        self.discover_bundles |= other.discover_bundles
        self.reload_messages |= other.reload_messages
        self.stale_session_lists |= other.stale_session_lists

    @classmethod
    def resync(cls, task_ids: set[str]) -> EventPlan:
        """Re-read everything the view shows (events were lost)."""
        return cls(
            reload_tasks=set(task_ids),
            reload_sessions=True,
            discover_bundles=True,
            reload_messages=True,
            stale_session_lists=set(task_ids),
        )

    @property
    def needs_io(self) -> bool:
        return bool(
            self.reload_tasks
            or self.reload_sessions
            or self.discover_bundles
            or self.reload_messages
        )


def plan_event(
    event_type: str,
    data: Mapping[str, Any],
    *,
    active_task_id: str,
    active_session_id: str,
    session_pending: str | None,
    showing_bundle: bool,
    known_session_ids: frozenset[str] = frozenset(),
) -> EventPlan:
    """The reads one event calls for. Call it *after* the event's projection was applied, so
    ``session_pending`` is already the event's value: a new current-turn question finds its
    session advertising ``clarification`` and discovery runs in the same event (S05).

    Event payloads are never read as truth about bundles or summaries beyond their revisioned
    projection: they only say what to re-read.
    """
    plan = EventPlan()
    task_id = as_text(data.get("task_id"))
    session_id = as_text(data.get("session_id"))
    if event_type in ("task.created", "task.updated", "task.status_summary.invalidated"):
        if task_id:
            plan.reload_tasks.add(task_id)
        return plan
    if event_type == "task.deleted":
        # Re-read, not trusted: a task the read no longer finds leaves the projections.
        if task_id:
            plan.reload_tasks.add(task_id)
            plan.stale_session_lists.add(task_id)
        return plan
    if event_type in MESSAGE_EVENTS or event_type in TURN_EVENTS or event_type == "session.updated":
        if task_id:
            plan.stale_session_lists.add(task_id)
        lifecycle = event_type in TURN_EVENTS or event_type == "session.updated"
        unknown_session = bool(session_id) and session_id not in known_session_ids
        if task_id and task_id == active_task_id and (lifecycle or unknown_session):
            plan.reload_sessions = True
        if session_id and session_id == active_session_id:
            message = data.get("message") if isinstance(data.get("message"), Mapping) else {}
            is_question = message.get("type") in ("clarification_request", "permission_request")
            if (
                event_type in TURN_EVENTS
                or event_type == "session.updated"
                or is_question
                or session_pending is not None
                or showing_bundle
            ):
                plan.discover_bundles = True
            if event_type in TURN_EVENTS or event_type == "session.updated":
                # A turn's messages may change without their own events (recovery replay).
                plan.reload_messages = event_type == "turn.completed"
    return plan
