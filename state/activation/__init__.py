"""Task activation decisions for the desktop sidebar and phone task sheets, framework-free.

Reflex state wraps these: it owns one :class:`ActivationFlow` per client, feeds it REST and
WebSocket payloads, and runs the :class:`Decision` effects it returns. Nothing here imports
Reflex or performs I/O, so every branch of the spec's activation rules is unit-testable.
"""

from state.activation.flow import (
    DESKTOP,
    ActivationFlow,
    LoadAborted,
    Loaded,
    LoadFailed,
    LoadResult,
    LoadTicket,
    Outcome,
    as_outcome,
)
from state.activation.generations import GenerationCounter, Selection, SheetSelection, TaskLoads
from state.activation.models import (
    PayloadError,
    Revision,
    RevisionError,
    SessionInfo,
    TaskSummary,
    parse_epoch,
    sessions_from_json,
)
from state.activation.projections import SessionProjection, SessionProjections
from state.activation.selection import (
    ClearActiveSession,
    CloseSheet,
    Decision,
    DecisionKind,
    Effect,
    OpenSession,
    OpenTaskRoute,
    Reason,
    ReleaseLayout,
    choose_session,
    task_route,
)

__all__ = [
    "DESKTOP",
    "ActivationFlow",
    "ClearActiveSession",
    "CloseSheet",
    "Decision",
    "DecisionKind",
    "Effect",
    "GenerationCounter",
    "LoadAborted",
    "LoadFailed",
    "LoadResult",
    "LoadTicket",
    "Loaded",
    "OpenSession",
    "OpenTaskRoute",
    "Outcome",
    "PayloadError",
    "Reason",
    "ReleaseLayout",
    "Revision",
    "RevisionError",
    "Selection",
    "SessionInfo",
    "SessionProjection",
    "SessionProjections",
    "SheetSelection",
    "TaskLoads",
    "TaskSummary",
    "as_outcome",
    "choose_session",
    "parse_epoch",
    "sessions_from_json",
    "task_route",
]
