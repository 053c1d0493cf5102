"""Plain data the workspace UI renders, and the pure functions that build and update it.

Nothing here imports Reflex or performs I/O: the Reflex state (``state.app_state``) keeps the
API payloads it received and calls these functions to turn them into rows, tabs, transcript
items and overlay questions, and to decide what a live event changes. Keeping them pure lets
unit tests cover every rendering kind and every event rule without a browser.

Payloads are the API contract's shapes (``docs`` of ``shared/spec/api-contract.md``): Task,
Session, Message and Bundle dicts, exactly what the in-process route functions return.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from state.activation.models import Revision

# -- routes ----------------------------------------------------------------------------------

HOME = "home"
TASK = "task"
SESSION = "session"
BOARD = "board"

_SESSION_PATH = re.compile(r"^/tasks/([^/]+)/sessions/([^/]+)/?$")
_TASK_PATH = re.compile(r"^/tasks/([^/]+)/?$")


@dataclass(frozen=True, slots=True)
class Route:
    """Which page a URL path names; ids are ``""`` when the route has none."""

    kind: str
    task_id: str = ""
    session_id: str = ""


def parse_route(path: str) -> Route:
    """``/``, ``/board``, ``/tasks/<id>``, ``/tasks/<id>/sessions/<id>``; anything else is
    home. Query strings and fragments are ignored."""
    path = path.split("?", 1)[0].split("#", 1)[0] or "/"
    if match := _SESSION_PATH.match(path):
        return Route(SESSION, match.group(1), match.group(2))
    if match := _TASK_PATH.match(path):
        return Route(TASK, match.group(1))
    if path.rstrip("/") == "/board":
        return Route(BOARD)
    return Route(HOME)


def task_path(task_id: str) -> str:
    return f"/tasks/{task_id}"


def session_path(task_id: str, session_id: str) -> str:
    return f"/tasks/{task_id}/sessions/{session_id}"


# -- labels ----------------------------------------------------------------------------------

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


def state_label(state: str) -> str:
    """``IN_PROGRESS`` -> ``In progress``."""
    return state.replace("_", " ").strip().capitalize()


def session_state_label(state: str) -> str:
    return _SESSION_STATE_LABELS.get(state, state_label(state))


def _text(raw: object, default: str = "") -> str:
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


# -- tasks, steps, board ---------------------------------------------------------------------


@dataclass
class StepItem:
    id: str
    name: str
    position: int


@dataclass
class WorkspaceItem:
    id: str
    name: str


def workspace_items(boot: Mapping[str, Any]) -> list[WorkspaceItem]:
    """The caller's workspaces by name (where a new task may go)."""
    items = [WorkspaceItem(w["id"], _text(w.get("name"))) for w in boot.get("workspaces", [])]
    return sorted(items, key=lambda w: (w.name.casefold(), w.id))


@dataclass
class WorkflowItem:
    id: str
    workspace_id: str
    workspace_name: str
    name: str
    steps: list[StepItem] = field(default_factory=list)


@dataclass
class TaskRow:
    """One task as the sidebar, the phone sheet and the board show it."""

    id: str = ""
    title: str = ""
    workspace_id: str = ""
    workspace_name: str = ""
    workflow_id: str = ""
    step_id: str = ""
    step_name: str = ""
    step_position: int = 0
    state: str = ""
    state_label: str = ""
    state_color: str = "gray"
    pending_action: str = ""
    pending_hint: str = ""


@dataclass
class StepGroup:
    """Sidebar section: tasks of every workspace that sit in a step of this name."""

    name: str
    position: int
    tasks: list[TaskRow] = field(default_factory=list)


@dataclass
class BoardColumn:
    id: str
    name: str
    tasks: list[TaskRow] = field(default_factory=list)
    #: Steps a card of this column may move to (every other step of the workflow).
    targets: list[StepItem] = field(default_factory=list)


def workflow_items(boot: Mapping[str, Any]) -> list[WorkflowItem]:
    """The boot payload's workflows with their steps (by position) and workspace names."""
    names = {w["id"]: _text(w.get("name")) for w in boot.get("workspaces", [])}
    items = []
    for wf in boot.get("workflows", []):
        steps = sorted(
            (
                StepItem(s["id"], _text(s.get("name")), int(s.get("position", 0)))
                for s in wf.get("steps", [])
            ),
            key=lambda s: (s.position, s.id),
        )
        items.append(
            WorkflowItem(
                id=wf["id"],
                workspace_id=wf["workspace_id"],
                workspace_name=names.get(wf["workspace_id"], ""),
                name=_text(wf.get("name")),
                steps=steps,
            )
        )
    items.sort(key=lambda w: (w.workspace_name.casefold(), w.name.casefold(), w.id))
    return items


def task_row(task: Mapping[str, Any], workflows: Sequence[WorkflowItem]) -> TaskRow:
    """A Task payload as a row; the step name and workspace come from the boot workflows."""
    step_id = _text(task.get("workflow_step_id"))
    workflow = next((w for w in workflows if w.id == task.get("workflow_id")), None)
    step = next((s for s in workflow.steps if s.id == step_id), None) if workflow else None
    state = _text(task.get("state"))
    pending = pending_of_task(task)
    return TaskRow(
        id=task["id"],
        title=_text(task.get("title")),
        workspace_id=_text(task.get("workspace_id")),
        workspace_name=workflow.workspace_name if workflow else "",
        workflow_id=_text(task.get("workflow_id")),
        step_id=step_id,
        step_name=step.name if step else "",
        step_position=step.position if step else 0,
        state=state,
        state_label=state_label(state),
        state_color=TASK_STATE_COLORS.get(state.upper(), "gray"),
        pending_action=pending,
        pending_hint=PENDING_HINTS.get(pending, "The agent waits for your answer")
        if pending
        else "",
    )


def task_rows(
    tasks: Iterable[Mapping[str, Any]], workflows: Sequence[WorkflowItem]
) -> list[TaskRow]:
    return [task_row(t, workflows) for t in tasks]


def step_groups(rows: Iterable[TaskRow]) -> list[StepGroup]:
    """Rows grouped by step name in workflow order (the default workflow's steps share names
    across workspaces, so "In Progress" is one section); empty steps are left out."""
    groups: dict[str, StepGroup] = {}
    for row in rows:
        key = row.step_name or "Other"
        group = groups.get(key)
        if group is None:
            group = groups[key] = StepGroup(key, row.step_position if row.step_name else 1 << 20)
        group.position = min(group.position, row.step_position if row.step_name else 1 << 20)
        group.tasks.append(row)
    return sorted(groups.values(), key=lambda g: (g.position, g.name))


def board_columns(workflow: WorkflowItem | None, rows: Iterable[TaskRow]) -> list[BoardColumn]:
    """The workflow's steps in order, each with its tasks and the steps a card may move to."""
    if workflow is None:
        return []
    mine = [r for r in rows if r.workflow_id == workflow.id]
    return [
        BoardColumn(
            id=step.id,
            name=step.name,
            tasks=[r for r in mine if r.step_id == step.id],
            targets=[s for s in workflow.steps if s.id != step.id],
        )
        for step in workflow.steps
    ]


def is_board_move(columns: Iterable[BoardColumn], task_id: str, step_id: str) -> bool:
    """Whether a card dropped on a board column asks for a move.

    The drop's ids come from the browser, so they are checked against what the board shows:
    the task is a card on it and the step is another of its columns. A drop on the card's own
    column, or of anything else, is no move at all (the server would refuse a foreign step).
    """
    for column in columns:
        if any(t.id == task_id for t in column.tasks):
            return any(s.id == step_id for s in column.targets)
    return False


def merge_task(
    current: Mapping[str, Any] | None,
    fresh: Mapping[str, Any],
    *,
    revision_at_read: int | None = None,
) -> dict[str, Any]:
    """A task read from the server, merged over what the client holds.

    Summaries only move forward: a fresh summary with a lower revision than the held one is
    replaced by the held one (an older read finishing late). A null summary (the server could
    not repair it) clears the held summary, unless a newer live summary arrived while that read
    was in flight (``revision_at_read`` is the revision held when the read began).
    """
    merged = dict(fresh)
    if current is None:
        return merged
    held = current.get("status_summary")
    held_rev = summary_revision(current)
    fresh_rev = summary_revision(fresh)
    if fresh.get("status_summary") is None:
        if held_rev is not None and held_rev != revision_at_read:
            merged["status_summary"] = held
    elif held_rev is not None and (fresh_rev is None or fresh_rev < held_rev):
        merged["status_summary"] = held
    return merged


def apply_summary(
    current: Mapping[str, Any] | None, summary: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """``task.status_summary.updated``: the task with ``summary`` if it is newer than the held
    one; ``None`` when nothing changes (unknown task, or an older or equal revision)."""
    if current is None or not isinstance(summary, Mapping):
        return None
    revision = summary.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool):
        return None
    held = summary_revision(current)
    if held is not None and revision <= held:
        return None
    return {**current, "status_summary": dict(summary)}


def invalidate_summary(
    current: Mapping[str, Any] | None, stale_revision: Any = None
) -> dict[str, Any] | None:
    """``task.status_summary.invalidated``: drop the held summary (the server could not repair
    it; the next read brings the authoritative value) -- unless the held one is newer than the
    ``stale_revision`` the server gave up on: a live summary that overtook the failed repair
    must not be erased by it. ``None`` when nothing changes."""
    if current is None or current.get("status_summary") is None:
        return None
    held = summary_revision(current)
    known_stale = isinstance(stale_revision, int) and not isinstance(stale_revision, bool)
    if held is not None and known_stale and held > stale_revision:
        return None
    return {**current, "status_summary": None}


# -- sessions --------------------------------------------------------------------------------


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
    ordered = sorted(sessions, key=lambda s: (_text(s.get("created_at")), s["id"]))
    tabs = []
    for number, session in enumerate(ordered, 1):
        state = _text(session.get("state"))
        if session["id"] in pending:
            action = pending[session["id"]] or ""
        else:
            action = _text(session.get("pending_action"))
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


# -- transcript ------------------------------------------------------------------------------

#: Rendering kinds of transcript items.
USER = "user"
AGENT = "agent"
QUESTION = "question"
PERMISSION = "permission"
STATUS = "status"

_REQUEST_STATUS = {
    # status -> (label, colour)
    "answered": ("Answered", "green"),
    "rejected": ("Skipped", "gray"),
    "cancelled": ("Cancelled", "gray"),
    "expired": ("Expired", "gray"),
}


@dataclass
class MessageItem:
    id: str
    kind: str
    author: str
    content: str
    created_at: str = ""
    status_label: str = ""
    status_color: str = "gray"
    #: For questions: the options as one line; for answered ones, what the user said.
    detail: str = ""
    answer: str = ""
    #: The question still waits for the user (it is in an active bundle).
    waiting: bool = False


def _options_line(meta: Mapping[str, Any]) -> str:
    labels = [
        _text(o.get("label"))
        for o in meta.get("options", [])
        if isinstance(o, Mapping) and _text(o.get("label"))
    ]
    return " · ".join(labels)


def _answer_line(meta: Mapping[str, Any]) -> str:
    answer = meta.get("answer")
    if not isinstance(answer, Mapping):
        return ""
    parts = [_text(label) for label in answer.get("option_labels", []) if _text(label)]
    text = _text(answer.get("text")).strip()
    if text:
        parts.append(text)
    return ", ".join(parts)


def message_item(
    message: Mapping[str, Any],
    active_pending_ids: frozenset[str],
    *,
    permission_pending: bool = False,
) -> MessageItem:
    """One transcript row, by message type.

    A clarification whose status is ``pending`` but whose bundle is not active (an older
    turn's question, or one waiting for its delivery) is shown as no longer active: only the
    repository rule decides whether a question is answerable, never the row's own status.
    Permission requests have no bundle view; a pending one waits only while the session's
    projection says ``permission`` (``permission_pending``).
    """
    mtype = _text(message.get("type"))
    author = _text(message.get("author"))
    meta = message.get("metadata") if isinstance(message.get("metadata"), Mapping) else {}
    base = {
        "id": message["id"],
        "author": author,
        "content": _text(message.get("content")),
        "created_at": _text(message.get("created_at")),
    }
    if mtype in ("clarification_request", "permission_request"):
        status = _text(meta.get("status"), "pending") or "pending"
        pid = _text(meta.get("pending_id"))
        if mtype == "clarification_request":
            kind = QUESTION
            content = _text(meta.get("question")) or base["content"]
            base["content"] = content
        else:
            kind = PERMISSION
        if status == "pending":
            if mtype == "permission_request":
                waiting = permission_pending
            else:
                waiting = pid in active_pending_ids
            if waiting:
                label, color = "Waiting for you", "amber"
            else:
                label, color = "No longer active", "gray"
        else:
            waiting = False
            label, color = _REQUEST_STATUS.get(status, (state_label(status), "gray"))
        return MessageItem(
            kind=kind,
            status_label=label,
            status_color=color,
            detail=_options_line(meta) if kind == QUESTION else "",
            answer=_answer_line(meta),
            waiting=waiting,
            **base,
        )
    if mtype == "status" or author not in ("user", "agent"):
        return MessageItem(kind=STATUS, **base)
    return MessageItem(kind=USER if author == "user" else AGENT, **base)


def message_items(
    messages: Iterable[Mapping[str, Any]],
    active_pending_ids: frozenset[str],
    *,
    permission_pending: bool = False,
) -> list[MessageItem]:
    return [
        message_item(m, active_pending_ids, permission_pending=permission_pending) for m in messages
    ]


def _message_order(message: Mapping[str, Any]) -> tuple[str, int, str]:
    """Transcript order: time, then the question's place in its bundle (rows of one bundle
    share ``created_at``; their ids are random within a millisecond), then id."""
    meta = message.get("metadata")
    position = meta.get("position") if isinstance(meta, Mapping) else None
    if not isinstance(position, int) or isinstance(position, bool):
        position = 0
    return (_text(message.get("created_at")), position, _text(message.get("id")))


def transcript_order(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages in transcript order (see :func:`_message_order`)."""
    return sorted((dict(m) for m in messages), key=_message_order)


def upsert_message(
    messages: Sequence[Mapping[str, Any]], message: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The transcript with ``message`` added or replaced (by id), in (created_at, id) order —
    the order the messages route returns."""
    out = [dict(m) for m in messages if m.get("id") != message.get("id")]
    out.append(dict(message))
    out.sort(key=_message_order)
    return out


def remove_message(messages: Sequence[Mapping[str, Any]], message_id: str) -> list[dict[str, Any]]:
    return [dict(m) for m in messages if m.get("id") != message_id]


# -- clarification overlay -------------------------------------------------------------------


@dataclass
class OptionItem:
    id: str
    label: str
    selected: bool = False


@dataclass
class QuestionItem:
    """One question of the overlay's bundle, with what the user picked or typed so far."""

    message_id: str
    question: str
    options: list[OptionItem] = field(default_factory=list)
    text: str = ""

    @property
    def answered(self) -> bool:
        return any(o.selected for o in self.options) or bool(self.text.strip())


def question_items(
    bundle: Mapping[str, Any] | None, previous: Sequence[QuestionItem] = ()
) -> list[QuestionItem]:
    """The bundle's questions; choices the user already made on the same questions survive a
    refresh of the bundle (a live event must not wipe a half-filled answer)."""
    if not bundle:
        return []
    kept = {q.message_id: q for q in previous}
    items = []
    for raw in bundle.get("questions", []):
        old = kept.get(raw["message_id"])
        chosen = {o.id for o in old.options if o.selected} if old else set()
        options = [
            OptionItem(_text(o.get("id")), _text(o.get("label")), _text(o.get("id")) in chosen)
            for o in raw.get("options", [])
            if isinstance(o, Mapping)
        ]
        items.append(
            QuestionItem(
                message_id=raw["message_id"],
                question=_text(raw.get("question")),
                options=options,
                text=old.text if old else "",
            )
        )
    return items


def choose_option(
    questions: Sequence[QuestionItem], message_id: str, option_id: str
) -> list[QuestionItem]:
    """Pick one option of a question (the options act as a single choice; picking the chosen
    option again clears it)."""
    out = []
    for q in questions:
        if q.message_id != message_id:
            out.append(q)
            continue
        out.append(
            dataclasses.replace(
                q,
                options=[
                    dataclasses.replace(o, selected=(o.id == option_id and not o.selected))
                    for o in q.options
                ],
            )
        )
    return out


def set_answer_text(
    questions: Sequence[QuestionItem], message_id: str, text: str
) -> list[QuestionItem]:
    return [
        dataclasses.replace(q, text=text) if q.message_id == message_id else q for q in questions
    ]


def answers_payload(questions: Sequence[QuestionItem]) -> list[dict[str, Any]]:
    """The ``answers`` of a respond body: every question, its chosen options and its text."""
    return [
        {
            "message_id": q.message_id,
            "option_ids": [o.id for o in q.options if o.selected],
            "text": q.text.strip(),
        }
        for q in questions
    ]


def first_unanswered(questions: Sequence[QuestionItem]) -> int | None:
    """Index of the first question without an answer, or ``None`` when all are answered."""
    return next((i for i, q in enumerate(questions) if not q.answered), None)


# -- live events -----------------------------------------------------------------------------

MESSAGE_EVENTS = frozenset(
    {"session.message.added", "session.message.updated", "session.message.deleted"}
)
TURN_EVENTS = frozenset({"turn.started", "turn.completed"})


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
    task_id = _text(data.get("task_id"))
    session_id = _text(data.get("session_id"))
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
            is_question = message.get("type") == "clarification_request"
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
