"""Which session a task activation opens, as an ordered list of effects for the UI to run.

A decision never performs anything itself: the Reflex state runs ``decision.effects`` in order.
The order is part of the contract — for the task-only route the outgoing session layout is
released *before* the active session is cleared (S14).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from state.activation.models import SessionInfo, TaskSummary
from state.activation.projections import SessionProjections


@dataclass(frozen=True, slots=True)
class ReleaseLayout:
    """Release the outgoing session's layout (panels, chat, overlay). ``session_id`` is the
    session that was active when the activation settled, or ``None`` if there was none."""

    session_id: str | None


@dataclass(frozen=True, slots=True)
class ClearActiveSession:
    """Forget the active session (after its layout was released)."""


@dataclass(frozen=True, slots=True)
class OpenSession:
    """Make ``session_id`` the active session of ``task_id`` and navigate to it."""

    task_id: str
    session_id: str


@dataclass(frozen=True, slots=True)
class OpenTaskRoute:
    """Navigate to the task-only route (no session selected)."""

    task_id: str


@dataclass(frozen=True, slots=True)
class CloseSheet:
    """Close exactly this phone task sheet instance — never another or a replacement one."""

    sheet_id: str


Effect = ReleaseLayout | ClearActiveSession | OpenSession | OpenTaskRoute | CloseSheet


class DecisionKind(StrEnum):
    OPEN_SESSION = "open_session"
    OPEN_TASK = "open_task"
    #: Change nothing: no navigation, no selection change, no sheet closed.
    INERT = "inert"


class Reason(StrEnum):
    """Why a decision came out as it did (for logs and tests; the UI acts on ``effects``)."""

    PENDING_OWNER = "pending_owner"
    REMEMBERED = "remembered"
    PRIMARY = "primary"
    NEWEST = "newest"
    NO_SESSIONS = "no_sessions"
    NO_PENDING_OWNER = "no_pending_owner"
    SUMMARY_CHANGED = "summary_changed"
    LOAD_FAILED = "load_failed"
    SELECTION_SUPERSEDED = "selection_superseded"
    LOAD_SUPERSEDED = "load_superseded"
    ABORTED = "aborted"
    TASK_GONE = "task_gone"


@dataclass(frozen=True, slots=True)
class Decision:
    kind: DecisionKind
    task_id: str
    reason: Reason
    effects: tuple[Effect, ...] = ()
    session_id: str | None = None

    @property
    def inert(self) -> bool:
        return self.kind is DecisionKind.INERT


def inert(task_id: str, reason: Reason) -> Decision:
    """A continuation that lost its right to act: it changes nothing at all."""
    return Decision(DecisionKind.INERT, task_id, reason)


def open_session(task_id: str, session_id: str, reason: Reason, sheet_id: str | None) -> Decision:
    effects: tuple[Effect, ...] = (OpenSession(task_id, session_id),)
    if sheet_id is not None:
        effects += (CloseSheet(sheet_id),)
    return Decision(DecisionKind.OPEN_SESSION, task_id, reason, effects, session_id)


def task_route(
    task_id: str, reason: Reason, *, active_session_id: str | None, sheet_id: str | None
) -> Decision:
    """The task-only fallback: release the outgoing layout, clear the active session, open the
    task route, then (phone) close the sheet. Used whenever no session may be guessed."""
    effects: tuple[Effect, ...] = (
        ReleaseLayout(active_session_id),
        ClearActiveSession(),
        OpenTaskRoute(task_id),
    )
    if sheet_id is not None:
        effects += (CloseSheet(sheet_id),)
    return Decision(DecisionKind.OPEN_TASK, task_id, reason, effects)


class _Unknown:
    """A session whose projection the store refused (e.g. pre-restart epoch): it may be
    anything, so it matches no pending action."""


_UNKNOWN = _Unknown()


def _pending_of(
    session: SessionInfo, projections: SessionProjections | None
) -> str | _Unknown | None:
    if projections is None:
        return session.pending_action
    entry = projections.get(session.id)
    return entry.pending_action if entry is not None else _UNKNOWN


def _newest(sessions: Iterable[SessionInfo]) -> SessionInfo | None:
    return max(sessions, key=lambda s: s.newness, default=None)


def choose_session(
    task: TaskSummary,
    sessions: Iterable[SessionInfo],
    remembered_session_id: str | None = None,
    *,
    active_session_id: str | None = None,
    sheet_id: str | None = None,
    projections: SessionProjections | None = None,
) -> Decision:
    """The session (or task route) that activating ``task`` opens.

    - Pending task: the newest (``created_at``, then ``id``) input-capable session whose
      ``pending_action`` equals the task's. This outranks remembered and primary sessions
      (S09). No such session → the task-only route; never a guess (S14).
    - Clean task: the remembered session if still listed, else the primary session (the
      ``is_primary`` flag, else the summary's ``primary_session_id``), else the newest session,
      else the task-only route. Session pending values are not consulted: choosing a
      non-primary session for a clean task is out of scope.

    With ``projections``, a session's pending value is the store's newest one (a newer event
    beats the list being applied); a session the store does not know is never a pending owner.
    ``sheet_id`` marks a phone activation: opening anything also closes that sheet.
    """
    listed = [s for s in sessions if s.task_id == task.task_id]
    if task.pending_action is not None:
        owners = [
            s
            for s in listed
            if s.input_capable and _pending_of(s, projections) == task.pending_action
        ]
        owner = _newest(owners)
        if owner is None:
            return task_route(
                task.task_id,
                Reason.NO_PENDING_OWNER,
                active_session_id=active_session_id,
                sheet_id=sheet_id,
            )
        return open_session(task.task_id, owner.id, Reason.PENDING_OWNER, sheet_id)

    by_id = {s.id: s for s in listed}
    if remembered_session_id is not None and remembered_session_id in by_id:
        return open_session(task.task_id, remembered_session_id, Reason.REMEMBERED, sheet_id)
    primary = _newest(s for s in listed if s.is_primary)
    if primary is None and task.primary_session_id is not None:
        primary = by_id.get(task.primary_session_id)
    if primary is not None:
        return open_session(task.task_id, primary.id, Reason.PRIMARY, sheet_id)
    newest = _newest(listed)
    if newest is not None:
        return open_session(task.task_id, newest.id, Reason.NEWEST, sheet_id)
    return task_route(
        task.task_id, Reason.NO_SESSIONS, active_session_id=active_session_id, sheet_id=sheet_id
    )
