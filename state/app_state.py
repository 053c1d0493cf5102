"""The workspace UI's Reflex state: a thin shell around ``state.activation`` and ``ui_models``.

What lives here is only what Reflex needs: the vars the browser renders, the payloads they are
built from (backend vars, ``_``-prefixed), and event handlers that do I/O through
``state.gateway`` and then run the decisions of the framework-free modules:

- task activation: :class:`~state.activation.ActivationFlow` decides (``begin`` before the
  forced session load, ``settle`` after it); :meth:`AppState._run_effects` only executes the
  decision's effects in order (release layout → clear session → open route → close sheet);
- live updates: :func:`ensure_watcher` (one asyncio task per browser tab, bounded) applies bus
  events: the revisioned session projection first (S05), then what
  :func:`~state.ui_models.plan_event` says to re-read.

Handlers that wait on the backend are background handlers, so a slow load never holds the
client's state lock: a newer activation can start (and supersede the older one) meanwhile.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import reflex as rx

from backend import failpoints
from state import gateway
from state.activation import (
    DESKTOP,
    ActivationFlow,
    ClearActiveSession,
    CloseSheet,
    Decision,
    LoadTicket,
    OpenSession,
    OpenTaskRoute,
    ReleaseLayout,
    TaskSummary,
    sessions_from_json,
)
from state.backend_ref import get_runtime, is_connected, tab_state
from state.layout import coerce_layout
from state.live import INFLIGHT, WATCHERS, WatchHandle, next_batch
from state.ui_models import (
    BOARD,
    BUSY_SESSION_STATES,
    ENDED_SESSION_STATES,
    HOME,
    MESSAGE_EVENTS,
    SESSION,
    TASK,
    BoardColumn,
    EventPlan,
    MessageItem,
    QuestionItem,
    SessionTab,
    StepGroup,
    TaskRow,
    WorkflowItem,
    WorkspaceItem,
    answers_payload,
    apply_summary,
    board_columns,
    choose_option,
    first_unanswered,
    invalidate_summary,
    is_board_move,
    is_newer_list,
    merge_task,
    message_items,
    parse_route,
    plan_event,
    question_items,
    remove_message,
    session_path,
    session_tabs,
    set_answer_text,
    step_groups,
    summary_revision,
    task_path,
    task_rows,
    transcript_order,
    upsert_message,
    workflow_items,
    workspace_items,
)

log = logging.getLogger(__name__)

#: How often an idle watcher checks that its tab is still connected.
WATCH_POLL_S = 5.0
#: The fault point that holds live-update application (tests make an overlay stale with it).
UI_EVENTS_FAULT = "ui.events"
#: Transcript events kept for replay over reads that were in flight when they arrived.
EVENT_LOG_LIMIT = 500


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


@dataclass(frozen=True, slots=True)
class Opened:
    """Where an activation's effects navigated."""

    path: str
    view: ViewRef


@dataclass(slots=True)
class EventReads:
    tasks: dict[str, dict[str, Any]] | None = None
    sessions: dict[str, Any] | None = None
    bundles: list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]] | None = None


async def _read_for(plan: EventPlan, view: ViewRef) -> EventReads:
    """The reads a batch of events asked for; a failed read is skipped (the next event or
    page load converges) rather than shown as an empty list."""
    reads = EventReads()

    async def attempt(what: str, work: Any) -> Any:
        try:
            return await work
        except Exception as error:
            log.warning("live update: reading %s failed: %r", what, error)
            return None

    if plan.reload_tasks:
        reads.tasks = await attempt("tasks", gateway.tasks_by_id(plan.reload_tasks))
    if plan.reload_sessions and view.task_id:
        reads.sessions = await attempt("sessions", gateway.sessions(view.task_id))
    if plan.discover_bundles and view.session_id:
        reads.bundles = await attempt("bundles", gateway.bundles(view.session_id))
    if plan.reload_messages and view.session_id:
        reads.messages = await attempt("messages", gateway.messages(view.session_id))
    return reads


def ensure_watcher(token: str) -> None:
    """Start live updates for a tab unless they already run.

    The watcher is a plain asyncio task, not a Reflex background handler: Reflex cancels a
    page-load's chained events when the tab navigates, which would silently stop live updates
    mid-read. It applies changes through ``app.modify_state`` (which sends the delta) and is
    bounded by :data:`~state.live.WATCHERS` (ends when its tab is gone, cancelled at shutdown).
    An empty ``contextvars.Context`` keeps the triggering event's context out of it.
    """
    if WATCHERS.running(token):
        return
    handle = WATCHERS.claim(token)
    if handle is None:
        log.warning("live updates refused for a tab: watcher limit reached")
        return
    handle.task = asyncio.create_task(_watch(handle), context=contextvars.Context())


async def _watch(handle: WatchHandle) -> None:
    """Apply the backend's bus events to one tab for as long as it is connected."""
    token = handle.token
    try:
        async with get_runtime().bus.subscribe() as queue:
            while WATCHERS.keep_going(handle, is_connected):
                batch = await next_batch(queue, WATCH_POLL_S)
                if not batch:
                    continue
                await failpoints.hit(UI_EVENTS_FAULT)
                async with tab_state(token, AppState) as state:
                    plan, view = state._apply_events(batch)
                if not plan.needs_io:
                    continue
                reads = await _read_for(plan, view)
                async with tab_state(token, AppState) as state:
                    state._apply_reads(plan, view, reads)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("live updates for a tab failed; the next page load restarts them")
    finally:
        WATCHERS.release(handle)
        log.debug("live updates stopped for a tab; %d watchers left", len(WATCHERS))


class AppState(rx.State):
    """One browser tab's view of the workspace."""

    # -- what the browser renders ------------------------------------------------------------
    loaded: bool = False
    load_error: str = ""
    route_kind: str = HOME
    rows: list[TaskRow] = []  # noqa: RUF012 - how Reflex declares state vars
    groups: list[StepGroup] = []  # noqa: RUF012
    workflows: list[WorkflowItem] = []  # noqa: RUF012
    workspaces: list[WorkspaceItem] = []  # noqa: RUF012
    board_workflow_id: str = ""
    board_columns: list[BoardColumn] = []  # noqa: RUF012
    board_notice: str = ""
    active_task: TaskRow = TaskRow()
    active_task_id: str = ""
    activating_task_id: str = ""
    tabs: list[SessionTab] = []  # noqa: RUF012
    active_session_id: str = ""
    messages: list[MessageItem] = []  # noqa: RUF012
    view_loading: bool = False
    questions: list[QuestionItem] = []  # noqa: RUF012
    bundle_pending_id: str = ""
    question_index: int = 0
    overlay_busy: str = ""
    overlay_error: str = ""
    chat_notice: str = ""
    draft: str = ""
    composer_busy: bool = False
    composer_error: str = ""
    new_task_open: bool = False
    new_task_busy: bool = False
    new_task_error: str = ""
    start_open: bool = False
    start_busy: bool = False
    start_error: str = ""
    #: ``phone`` / ``tablet`` / ``desktop`` as the browser reports it (``components/viewport.py``);
    #: ``""`` until then. It decides which task sheet is mounted (``state/layout.py``).
    layout_class: str = ""

    # -- payloads the view is built from (server only) ---------------------------------------
    _flow: ActivationFlow | None = None
    _tasks: dict[str, dict[str, Any]] = {}  # noqa: RUF012
    _workflow_items: list[WorkflowItem] = []  # noqa: RUF012
    _tab_sessions: list[dict[str, Any]] = []  # noqa: RUF012
    _session_cache: dict[str, list[dict[str, Any]]] = {}  # noqa: RUF012
    _messages: list[dict[str, Any]] = []  # noqa: RUF012
    _bundles: list[dict[str, Any]] = []  # noqa: RUF012
    _remembered: dict[str, str] = {}  # noqa: RUF012
    _view_gen: int = 0
    _expect_path: str = ""
    _revisions_at_read: dict[str, int | None] = {}  # noqa: RUF012
    _activating_gen: int = 0
    _event_seq: int = 0
    _event_log: list[tuple[int, str, dict[str, Any]]] = []  # noqa: RUF012
    _discovery_seq: int = 0

    # -- computed ------------------------------------------------------------------------------

    @rx.var
    def has_bundle(self) -> bool:
        return len(self.questions) > 0

    @rx.var
    def question_count(self) -> int:
        return len(self.questions)

    @rx.var
    def current_question(self) -> QuestionItem:
        if 0 <= self.question_index < len(self.questions):
            return self.questions[self.question_index]
        return QuestionItem(message_id="", question="")

    @rx.var
    def can_submit(self) -> bool:
        return bool(self.questions) and first_unanswered(self.questions) is None

    @rx.var
    def session_state(self) -> str:
        return next((t.state for t in self.tabs if t.id == self.active_session_id), "")

    @rx.var
    def session_busy(self) -> bool:
        return self.session_state in BUSY_SESSION_STATES

    @rx.var
    def session_ended(self) -> bool:
        return self.session_state in ENDED_SESSION_STATES

    @rx.var
    def pending_count(self) -> int:
        return sum(1 for r in self.rows if r.pending_action)

    @rx.var
    def board_workflow_name(self) -> str:
        wf = next((w for w in self.workflows if w.id == self.board_workflow_id), None)
        return f"{wf.workspace_name} · {wf.name}" if wf else ""

    # -- small helpers (underscore: not event handlers) ---------------------------------------

    def _activation(self) -> ActivationFlow:
        if self._flow is None:
            self._flow = ActivationFlow()
        return self._flow

    def _touch_flow(self) -> None:
        """The flow mutates in place; reassigning marks it for persistence."""
        self._flow = self._flow

    def _client_token(self) -> str:
        return self.router.session.client_token

    def _view(self) -> ViewRef:
        return ViewRef(
            self.active_task_id,
            self.active_session_id,
            self._view_gen,
            self._event_seq,
            self._discovery_seq,
        )

    def _apply_view_reads(
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
        if view.generation != self._view_gen or view.session_id != self.active_session_id:
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

    def _apply_boot(self, boot: Mapping[str, Any]) -> None:
        flow = self._activation()
        try:
            flow.projections.rebuild(boot.get("epoch", "0"))
        except ValueError:
            log.warning("boot payload with an unreadable epoch %r", boot.get("epoch"))
        self._touch_flow()
        self._workflow_items = workflow_items(boot)
        self.workflows = self._workflow_items
        self.workspaces = workspace_items(boot)
        fresh = {t["id"]: t for t in boot.get("tasks", [])}
        held = self._tasks
        self._tasks = {
            tid: merge_task(
                held.get(tid), t, revision_at_read=summary_revision(held.get(tid) or {})
            )
            for tid, t in fresh.items()
        }
        if not self.board_workflow_id or all(
            w.id != self.board_workflow_id for w in self._workflow_items
        ):
            self.board_workflow_id = self._workflow_items[0].id if self._workflow_items else ""
        self._render_tasks()

    def _store_tasks(self, updated: Mapping[str, dict[str, Any] | None]) -> None:
        """Replace (value) or drop (``None``) tasks, keeping the list's order."""
        tasks = dict(self._tasks)
        for tid, value in updated.items():
            if value is None:
                tasks.pop(tid, None)
            else:
                tasks[tid] = value
        self._tasks = tasks
        self._render_tasks()

    def _render_tasks(self) -> None:
        rows = task_rows(self._tasks.values(), self._workflow_items)
        self.rows = rows
        self.groups = step_groups(rows)
        wf = next((w for w in self._workflow_items if w.id == self.board_workflow_id), None)
        self.board_columns = board_columns(wf, rows)
        self.active_task = next((r for r in rows if r.id == self.active_task_id), TaskRow())

    def _pending_map(self) -> dict[str, str | None]:
        flow = self._activation()
        return {
            s["id"]: flow.projections.pending_action(s["id"])
            for s in self._tab_sessions
            if s["id"] in flow.projections
        }

    def _render_tabs(self) -> None:
        self.tabs = session_tabs(self._tab_sessions, self._pending_map())

    def _render_view(self) -> None:
        """Transcript and overlay from the held messages and bundles."""
        bundle = self._bundles[0] if self._bundles else None
        active = frozenset(b["pending_id"] for b in self._bundles)
        permission = self._pending_map().get(self.active_session_id) == "permission"
        self.messages = message_items(self._messages, active, permission_pending=permission)
        pending_id = bundle["pending_id"] if bundle else ""
        previous = self.questions if pending_id == self.bundle_pending_id else []
        if pending_id != self.bundle_pending_id:
            self.question_index = 0
            self.overlay_error = ""
            self.overlay_busy = ""
        self.questions = question_items(bundle, previous)
        self.bundle_pending_id = pending_id
        if self.question_index >= len(self.questions):
            self.question_index = max(0, len(self.questions) - 1)

    def _set_tab_sessions(self, task_id: str, payload: Mapping[str, Any]) -> None:
        """A fresh session list: feed the projection store (newer revisions only, S06), cache
        it for clean activations, and show it if the task is still the active one."""
        rows = list(payload.get("sessions", []))
        flow = self._activation()

        try:
            flow.projections.apply_sessions(sessions_from_json(payload))
        except ValueError:
            log.warning("unreadable session list for task %s", task_id)
        self._touch_flow()
        active = task_id == self.active_task_id
        held = self._tab_sessions if active else self._session_cache.get(task_id, [])
        if not is_newer_list(held, rows):
            # An older read finishing last: its projections were offered above (newer-only),
            # but its states and session set must not replace the newer list.
            if active:
                self._render_tabs()
            return
        self._session_cache = {**self._session_cache, task_id: rows}
        if active:
            self._tab_sessions = rows
            self._render_tabs()
            self._render_view()

    # -- effects of an activation decision (run in order, under the state lock) ---------------

    def _release_layout(self) -> None:
        """Let go of the outgoing session's panels: transcript, overlay, composer state."""
        self._view_gen += 1
        self._messages = []
        self._bundles = []
        self._event_log = []
        self.messages = []
        self.questions = []
        self.bundle_pending_id = ""
        self.question_index = 0
        self.overlay_error = ""
        self.overlay_busy = ""
        self.chat_notice = ""
        self.composer_error = ""
        self.view_loading = False

    def _select_task(self, task_id: str) -> None:
        if task_id != self.active_task_id:
            self.active_task_id = task_id
            self._tab_sessions = list(self._session_cache.get(task_id, []))
            self.start_open = False
            self.start_error = ""
        self.active_task = next((r for r in self.rows if r.id == task_id), TaskRow())
        self._render_tabs()

    def _open_session(self, task_id: str, session_id: str) -> ViewRef:
        """Make ``session_id`` the active session; the caller loads its transcript."""
        if session_id != self.active_session_id or task_id != self.active_task_id:
            self._release_layout()
        else:
            self._view_gen += 1
        self._select_task(task_id)
        self.active_session_id = session_id
        self._remembered = {**self._remembered, task_id: session_id}
        self.view_loading = True
        return self._view()

    def _run_effects(
        self, decision: Decision, close_sheet: Callable[[str], None] | None = None
    ) -> Opened | None:
        opened: Opened | None = None
        for effect in decision.effects:
            if isinstance(effect, ReleaseLayout):
                self._release_layout()
            elif isinstance(effect, ClearActiveSession):
                self.active_session_id = ""
            elif isinstance(effect, OpenSession):
                view = self._open_session(effect.task_id, effect.session_id)
                opened = Opened(session_path(effect.task_id, effect.session_id), view)
            elif isinstance(effect, OpenTaskRoute):
                self._select_task(effect.task_id)
                self.active_session_id = ""
                opened = Opened(task_path(effect.task_id), self._view())
            elif isinstance(effect, CloseSheet) and close_sheet is not None:
                close_sheet(effect.sheet_id)
        if opened is not None:
            self._expect_path = opened.path
            self.route_kind = SESSION if opened.view.session_id else TASK
        return opened

    def _apply_session_view(
        self, view: ViewRef, messages: list[dict[str, Any]], bundles: list[dict[str, Any]]
    ) -> None:
        if not self._apply_view_reads(view, messages, bundles):
            return  # the user moved on; this read belongs to a view that is gone
        self.view_loading = False
        self._render_view()

    # -- activation ----------------------------------------------------------------------------

    def _begin_activation(self, task_id: str, surface: str) -> LoadTicket | None:
        task = self._tasks.get(task_id)
        flow = self._activation()
        if task is None or flow.surface(surface) is None:
            return None
        ticket = flow.begin(TaskSummary.from_task(task), surface=surface)
        self._touch_flow()
        self.activating_task_id = task_id
        self._activating_gen = ticket.generation
        return ticket

    def _settle_activation(
        self,
        ticket: LoadTicket,
        result: Any,
        close_sheet: Callable[[str], None] | None,
    ) -> Opened | None:
        """Apply the load's task read (newer summaries only), then let the flow decide."""
        flow = self._activation()
        outcome: Any = result
        if isinstance(result, gateway.ActivationLoad):
            if flow.is_current(ticket):
                held = self._tasks.get(ticket.task_id)
                if result.task is None:
                    self._store_tasks({ticket.task_id: None})
                else:
                    merged = merge_task(held, result.task, revision_at_read=ticket.summary_revision)
                    self._store_tasks({ticket.task_id: merged})
            outcome = result.sessions
        current = self._tasks.get(ticket.task_id)
        summary = TaskSummary.from_task(current) if current is not None else None
        decision = flow.settle(
            ticket,
            outcome,
            summary,
            remembered_session_id=self._remembered.get(ticket.task_id),
            active_session_id=self.active_session_id or None,
        )
        self._touch_flow()
        if self._activating_gen == ticket.generation:
            self.activating_task_id = ""  # the newest activation settled (spinner off)
        log.debug("activation of %s: %s (%s)", ticket.task_id, decision.kind, decision.reason)
        if decision.inert:
            return None
        if isinstance(outcome, Mapping) and ticket.task_id in self._tasks:
            self._set_tab_sessions(ticket.task_id, outcome)
        return self._run_effects(decision, close_sheet)

    # -- page load -----------------------------------------------------------------------------

    @rx.event
    async def load_page(self) -> None:
        """Every route's ``on_load``: start live updates, then load what the URL names.

        A navigation this tab's own activation just made is not reloaded (the activation
        already loaded it), so activation stays one round of reads.
        """
        route = parse_route(self.router.url.path)
        self.route_kind = route.kind
        ensure_watcher(self._client_token())
        path = self.router.url.path.rstrip("/") or "/"
        if self._expect_path and path == self._expect_path and self.loaded:
            self._expect_path = ""
            return
        self._expect_path = ""
        try:
            boot = await gateway.boot()
        except Exception as error:
            log.exception("loading the workspace failed")
            self.load_error = gateway.describe(error).message
            self.loaded = True
            return
        self.load_error = ""
        self._apply_boot(boot)
        self.loaded = True
        if route.kind in (HOME, BOARD):
            self.activating_task_id = ""
            if self.active_session_id or self.active_task_id:
                self._release_layout()
            self.active_session_id = ""
            self.active_task_id = ""
            self.active_task = TaskRow()
            return
        if route.task_id not in self._tasks:
            self._release_layout()
            self.active_session_id = ""
            self.active_task_id = route.task_id
            self.active_task = TaskRow()
            self._tab_sessions = []
            self.tabs = []
            return
        try:
            payload = await gateway.sessions(route.task_id)
        except Exception as error:
            log.warning("loading sessions of %s failed: %r", route.task_id, error)
            payload = {"sessions": self._session_cache.get(route.task_id, [])}
        self._select_task(route.task_id)
        self._set_tab_sessions(route.task_id, payload)
        known = {s["id"] for s in payload.get("sessions", [])}
        if route.kind == SESSION and route.session_id in known:
            view = self._open_session(route.task_id, route.session_id)
            try:
                messages, bundles = await gateway.session_view(route.session_id)
            except Exception as error:
                log.warning("loading session %s failed: %r", route.session_id, error)
                messages, bundles = [], []
            self._apply_session_view(view, messages, bundles)
        else:
            self._release_layout()
            self.active_session_id = ""
            self._render_tabs()

    # -- activation from the desktop sidebar / phone task list ---------------------------------

    @rx.event(background=True)
    async def activate_task(self, task_id: str) -> AsyncIterator[Any]:
        """The user picked a task in the sidebar (desktop) or the phone task list."""
        async for event in drive_activation(self, task_id, DESKTOP):
            yield event

    # -- sessions --------------------------------------------------------------------------------

    @rx.event(background=True)
    async def open_session(self, session_id: str) -> AsyncIterator[Any]:
        """A session tab: an explicit choice, remembered for the task's next clean activation."""
        async with self:
            task_id = self.active_task_id
            if not task_id or all(s["id"] != session_id for s in self._tab_sessions):
                return
            view = self._open_session(task_id, session_id)
            path = session_path(task_id, session_id)
            self._expect_path = path
            self.route_kind = SESSION
        yield rx.redirect(path)
        await load_view_into(self, view)

    @rx.event(background=True)
    async def send_prompt(self, form_data: dict[str, Any] | None = None) -> AsyncIterator[Any]:
        """The composer: a newer turn on the active session (supersedes an open question).

        The form's own value wins over ``draft``: Enter may submit before the debounced
        ``on_change`` of the last keystrokes arrived.
        """
        submitted = str((form_data or {}).get("content", "") or "")
        async with self:
            content = (submitted or self.draft or "").strip()
            session_id = self.active_session_id
            if not content or not session_id or self.composer_busy:
                return
            self.composer_busy = True
            self.composer_error = ""
        error = None
        try:
            await gateway.prompt(session_id, content)
        except Exception as exc:
            error = gateway.describe(exc)
        async with self:
            self.composer_busy = False
            if error is None:
                if self.active_session_id == session_id:
                    self.draft = ""
            else:
                self.composer_error = error.message
        yield

    @rx.event
    def set_draft(self, value: str) -> None:
        self.draft = value

    @rx.event
    def toggle_start(self) -> None:
        self.start_open = not self.start_open
        self.start_error = ""

    @rx.event
    def set_start_open(self, value: bool) -> None:
        self.start_open = value
        self.start_error = ""

    @rx.event(background=True)
    async def start_session(self, form_data: dict[str, Any]) -> AsyncIterator[Any]:
        """ "Start session": a new session of the active task with its first prompt."""
        prompt_text = str(form_data.get("prompt", "")).strip()
        async with self:
            task_id = self.active_task_id
            if not task_id or self.start_busy:
                return
            if not prompt_text:
                self.start_error = "Write the first prompt for the agent."
                return
            self.start_busy = True
            self.start_error = ""
        try:
            created = await gateway.start_session(task_id, prompt_text)
            payload = await gateway.sessions(task_id)
        except Exception as exc:
            async with self:
                self.start_busy = False
                self.start_error = gateway.describe(exc).message
            return
        async with self:
            self.start_busy = False
            self.start_open = False
            if self.active_task_id != task_id:
                return
            self._set_tab_sessions(task_id, payload)
            view = self._open_session(task_id, created["id"])
            path = session_path(task_id, created["id"])
            self._expect_path = path
            self.route_kind = SESSION
        yield rx.redirect(path)
        await load_view_into(self, view)

    # -- the clarification overlay -------------------------------------------------------------

    @rx.event
    def pick_option(self, message_id: str, option_id: str) -> None:
        self.questions = choose_option(self.questions, message_id, option_id)
        self.overlay_error = ""

    @rx.event
    def set_answer_text(self, message_id: str, text: str) -> None:
        self.questions = set_answer_text(self.questions, message_id, text)
        self.overlay_error = ""

    @rx.event
    def next_question(self) -> None:
        self.question_index = min(self.question_index + 1, max(0, len(self.questions) - 1))

    @rx.event
    def previous_question(self) -> None:
        self.question_index = max(0, self.question_index - 1)

    @rx.event(background=True)
    async def submit_answer(self) -> AsyncIterator[Any]:
        async for event in respond_from(self, rejected=False):
            yield event

    @rx.event(background=True)
    async def skip_question(self) -> AsyncIterator[Any]:
        """Skip: reject exactly the visible bundle through ``/respond`` (``rejected: true``)."""
        async for event in respond_from(self, rejected=True):
            yield event

    @rx.event
    def dismiss_notice(self) -> None:
        self.chat_notice = ""

    # -- layout class ------------------------------------------------------------------------------

    @rx.event
    def set_layout_class(self, value: str) -> None:
        """The browser's layout class changed (or a page mounted): unknown values are ignored."""
        layout = coerce_layout(value)
        if layout is not None and layout != self.layout_class:
            self.layout_class = layout

    # -- new task --------------------------------------------------------------------------------

    @rx.event
    def set_new_task_open(self, value: bool) -> None:
        self.new_task_open = value
        self.new_task_error = ""

    @rx.event(background=True)
    async def create_task(self, form_data: dict[str, Any]) -> AsyncIterator[Any]:
        title = str(form_data.get("title", "")).strip()
        description = str(form_data.get("description", ""))
        workspace_id = str(form_data.get("workspace_id", "")) or None
        async with self:
            if self.new_task_busy:
                return
            if not title:
                self.new_task_error = "Give the task a title."
                return
            self.new_task_busy = True
            self.new_task_error = ""
        try:
            created = await gateway.create_task(title, description, workspace_id)
        except Exception as exc:
            async with self:
                self.new_task_busy = False
                self.new_task_error = gateway.describe(exc).message
            return
        async with self:
            self.new_task_busy = False
            self.new_task_open = False
            self._store_tasks({created["id"]: merge_task(self._tasks.get(created["id"]), created)})
            self._release_layout()
            self.active_session_id = ""
            self._select_task(created["id"])
            self._tab_sessions = []
            self._render_tabs()
            self.start_open = True
            path = task_path(created["id"])
            self._expect_path = path
            self.route_kind = TASK
        yield rx.redirect(path)

    # -- board -----------------------------------------------------------------------------------

    @rx.event
    def choose_board(self, workflow_id: str) -> None:
        self.board_workflow_id = workflow_id
        self.board_notice = ""
        self._render_tasks()

    @rx.event(background=True)
    async def move_task(self, task_id: str, step_id: str) -> AsyncIterator[Any]:
        """A card's "Move to" menu (every viewport, and the keyboard's way to move)."""
        async for event in move_from(self, task_id, step_id):
            yield event

    @rx.event(background=True)
    async def drop_card(self, step_id: str, task_id: str) -> AsyncIterator[Any]:
        """A card dragged onto a board column (``components/drag.py``): the menu's move.

        Both ids come from the browser's drop event, so only a card of this board dropped on
        another of its columns becomes a move request.
        """
        async with self:
            if not is_board_move(self.board_columns, task_id, step_id):
                return
        async for event in move_from(self, task_id, step_id):
            yield event

    # -- live updates ----------------------------------------------------------------------------

    def _apply_events(self, batch: list[Any]) -> tuple[EventPlan, ViewRef]:
        """In-memory part of a batch: projections first (S05), summaries (newer only),
        transcript rows of the active session; returns what must be re-read."""
        flow = self._activation()
        plan = EventPlan()
        touched_tasks: dict[str, dict[str, Any] | None] = {}
        messages_changed = False
        for event in batch:
            kind, data = event.type, event.data
            if kind in MESSAGE_EVENTS or kind == "session.updated":
                flow.projections.apply_event(data)
            if kind == "task.status_summary.updated":
                tid = data.get("task_id", "")
                updated = apply_summary(self._tasks.get(tid), data.get("status_summary"))
                if updated is not None:
                    touched_tasks[tid] = updated
                    self._tasks = {**self._tasks, tid: updated}
            elif kind == "task.status_summary.invalidated":
                tid = data.get("task_id", "")
                updated = invalidate_summary(self._tasks.get(tid), data.get("stale_revision"))
                if updated is not None:
                    touched_tasks[tid] = updated
                    self._tasks = {**self._tasks, tid: updated}
            if (
                kind in MESSAGE_EVENTS
                and self.active_session_id
                and data.get("session_id") == self.active_session_id
                and isinstance(data.get("message"), Mapping)
            ):
                message = data["message"]
                if kind == "session.message.deleted":
                    self._messages = remove_message(self._messages, message.get("id", ""))
                else:
                    self._messages = upsert_message(self._messages, message)
                self._event_seq += 1
                self._event_log = [
                    *self._event_log[-(EVENT_LOG_LIMIT - 1) :],
                    (
                        self._event_seq,
                        kind,
                        dict(message),
                    ),
                ]
                messages_changed = True
            plan.merge(
                plan_event(
                    kind,
                    data,
                    active_task_id=self.active_task_id,
                    active_session_id=self.active_session_id,
                    session_pending=flow.projections.pending_action(self.active_session_id),
                    showing_bundle=bool(self._bundles),
                    known_session_ids=frozenset(s["id"] for s in self._tab_sessions),
                )
            )
        self._touch_flow()
        if plan.discover_bundles:
            self._discovery_seq += 1
        if plan.stale_session_lists:
            self._session_cache = {
                tid: rows
                for tid, rows in self._session_cache.items()
                if tid not in plan.stale_session_lists
            }
        if touched_tasks:
            self._render_tasks()
        self._render_tabs()
        if messages_changed:
            self._render_view()
        self._revisions_at_read = {
            tid: summary_revision(self._tasks.get(tid) or {}) for tid in plan.reload_tasks
        }
        return plan, self._view()

    def _apply_reads(self, plan: EventPlan, view: ViewRef, reads: EventReads) -> None:
        if reads.tasks is not None:
            at_read = self._revisions_at_read
            self._store_tasks(
                {
                    tid: (
                        merge_task(
                            self._tasks.get(tid),
                            reads.tasks[tid],
                            revision_at_read=at_read.get(tid),
                        )
                        if tid in reads.tasks
                        else None
                    )
                    for tid in plan.reload_tasks
                }
            )
            if self.active_task_id in plan.reload_tasks and self.active_task_id not in self._tasks:
                # The open task was deleted (or hidden): none of its panels stay on screen.
                self._release_layout()
                self.active_session_id = ""
                self._tab_sessions = []
                self.tabs = []
        if reads.sessions is not None and view.task_id == self.active_task_id:
            self._set_tab_sessions(view.task_id, reads.sessions)
        changed = reads.messages is not None or reads.bundles is not None
        if changed and self._apply_view_reads(view, reads.messages, reads.bundles):
            self._render_view()


# -- shared drivers (desktop sidebar and phone sheets run the same code) -----------------------


async def load_view_into(owner: Any, view: ViewRef, app_of: Any = None) -> None:
    """Read a session's transcript and active bundles, then show them if the tab still shows
    that session (``owner`` is the background handler's state proxy)."""
    try:
        messages, bundles = await gateway.session_view(view.session_id)
    except Exception as error:
        log.warning("loading session %s failed: %r", view.session_id, error)
        messages, bundles = [], []
    async with owner:
        app = owner if app_of is None else await app_of(owner)
        app._apply_session_view(view, messages, bundles)


async def drive_activation(
    owner: Any,
    task_id: str,
    surface: str,
    *,
    app_of: Any = None,
    close_sheet: Callable[[Any, str], None] | None = None,
) -> AsyncIterator[Any]:
    """One task activation, the same for every surface:

    ``begin`` under the lock → abort the loads it supersedes → the forced (pending task) or
    cached (clean task) session load without the lock → ``settle`` under the lock and run its
    effects → navigate → load the opened session's transcript and bundle.

    ``owner`` is the handler's state proxy; ``app_of(owner)`` returns the :class:`AppState`
    (the owner itself for the desktop); ``close_sheet(owner, sheet_id)`` closes a phone sheet.
    """
    async with owner:
        app = owner if app_of is None else await app_of(owner)
        ticket = app._begin_activation(task_id, surface)
        token = app._client_token()
        cached = app._session_cache.get(task_id)
    if ticket is None:
        return
    INFLIGHT.abort(token, ticket.supersedes)
    if ticket.force or cached is None:
        result: Any = await INFLIGHT.run(token, ticket.generation, gateway.activation_load(task_id))
    else:
        result = {"sessions": cached}
    async with owner:
        app = owner if app_of is None else await app_of(owner)
        closer = (lambda sheet_id: close_sheet(owner, sheet_id)) if close_sheet else None
        opened = app._settle_activation(ticket, result, closer)
    if opened is None:
        return
    yield rx.redirect(opened.path)
    if opened.view.session_id:
        await load_view_into(owner, opened.view, app_of)


async def move_from(state: AppState, task_id: str, step_id: str) -> AsyncIterator[Any]:
    """Move a card to another step through the workflow guard, then show where it is.

    A refusal (a task with an open agent question cannot leave its step, or any other error)
    is shown above the board, and the card is re-read so it stays where the server keeps it.
    """
    async with state:
        state.board_notice = ""
        title = state._tasks.get(task_id, {}).get("title", "The task")
    notice = ""
    moved: dict[str, Any] | None = None
    try:
        moved = await gateway.move_task(task_id, step_id)
    except Exception as exc:
        error = gateway.describe(exc)
        if error.code == "clarification_pending":
            notice = f"“{title}” has an open agent question. Answer it before moving the task."
        else:
            notice = error.message
        try:
            moved = (await gateway.tasks_by_id([task_id])).get(task_id)
        except Exception as reread:
            log.warning("re-reading task %s after a refused move failed: %r", task_id, reread)
    async with state:
        state.board_notice = notice
        if moved is not None:
            state._store_tasks({task_id: merge_task(state._tasks.get(task_id), moved)})
    yield


async def respond_from(state: AppState, *, rejected: bool) -> AsyncIterator[Any]:
    """Submit (answers) or Skip (``rejected``) the visible bundle, then converge.

    409 (superseded or terminal, S15): the overlay closes and the view is re-read; a retryable
    500 keeps the overlay open with the same answer; a non-retryable one closes it.
    """
    async with state:
        if state.overlay_busy or not state.bundle_pending_id:
            return
        if not rejected:
            missing = first_unanswered(state.questions)
            if missing is not None:
                state.question_index = missing
                state.overlay_error = "Answer every question before submitting."
                return
        pending_id = state.bundle_pending_id
        answers = None if rejected else answers_payload(state.questions)
        view = state._view()
        task_id = state.active_task_id
        state.overlay_busy = "skip" if rejected else "submit"
        state.overlay_error = ""
        state.chat_notice = ""
    error = None
    try:
        await gateway.respond(pending_id, answers, rejected, None)
    except Exception as exc:
        error = gateway.describe(exc)
    try:
        messages, bundles = await gateway.session_view(view.session_id)
        tasks = await gateway.tasks_by_id([task_id]) if task_id else {}
    except Exception as exc:
        log.warning("refresh after respond failed: %r", exc)
        messages, bundles, tasks = None, None, {}
    async with state:
        state.overlay_busy = ""
        if task_id in tasks:
            state._store_tasks({task_id: merge_task(state._tasks.get(task_id), tasks[task_id])})
        if view.generation != state._view_gen or view.session_id != state.active_session_id:
            return
        keep_open = error is not None and (error.retryable or error.status == 400)
        if keep_open:
            state.overlay_error = error.message
        else:
            # Delivered, skipped, or refused as no longer active: this bundle is done here.
            state._bundles = [b for b in state._bundles if b["pending_id"] != pending_id]
            if error is not None:
                state.chat_notice = error.message
        # The server's word, unless live events already brought something newer.
        state._apply_view_reads(view, messages, bundles)
        state._render_view()
    yield
