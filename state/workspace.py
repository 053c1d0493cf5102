"""Changes that span panels, run on one tab's panel states under the tab's state lock.

An activation's effects, a page load and a batch of live events each change the task list,
the session view, the overlay and the composer together; :class:`Workspace` holds the tab's
panel instances so each such change is one synchronous step between awaits. Activation
decisions come from :class:`~state.activation.ActivationFlow`; this only executes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import reflex as rx

from state import gateway
from state.activation import (
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
from state.app_state import AppState
from state.board import BoardState
from state.composer import ComposerState
from state.overlay import OverlayState
from state.session_view import SessionViewState, ViewRef
from state.task_list import TaskListState
from state.ui_models import (
    MESSAGE_EVENTS,
    OVERFLOW_EVENT,
    SESSION,
    TASK,
    EventPlan,
    apply_summary,
    invalidate_summary,
    is_newer_list,
    merge_task,
    plan_event,
    remove_message,
    session_path,
    summary_revision,
    task_path,
    upsert_message,
    workflow_items,
    workspace_items,
)

log = logging.getLogger(__name__)

#: Transcript events kept for replay over reads that were in flight when they arrived.
EVENT_LOG_LIMIT = 500


S = TypeVar("S", bound=rx.State)


class TabState(Protocol):
    """Any state of one tab, or its proxy in a background handler (inside ``async with``)."""

    async def get_state(self, state_cls: type[S]) -> S: ...


@dataclass(frozen=True, slots=True)
class Opened:
    """Where an activation's effects navigated."""

    path: str
    view: ViewRef


@dataclass(slots=True)
class EventReads:
    """What the reads a batch of live events asked for returned (``None``: not read, or the
    read failed)."""

    tasks: dict[str, dict[str, Any]] | None = None
    sessions: dict[str, Any] | None = None
    bundles: list[dict[str, Any]] | None = None
    messages: list[dict[str, Any]] | None = None


@dataclass(slots=True)
class Workspace:
    """One tab's panels, fetched together (``await Workspace.of(state)``) inside the lock."""

    app: AppState
    tasks: TaskListState
    board: BoardState
    view: SessionViewState
    composer: ComposerState
    overlay: OverlayState

    @classmethod
    async def of(cls, state: TabState) -> Workspace:
        """The panels of ``state``'s tab."""
        return cls(
            app=await state.get_state(AppState),
            tasks=await state.get_state(TaskListState),
            board=await state.get_state(BoardState),
            view=await state.get_state(SessionViewState),
            composer=await state.get_state(ComposerState),
            overlay=await state.get_state(OverlayState),
        )

    # -- loads ---------------------------------------------------------------------------------

    def apply_boot(self, boot: Mapping[str, Any]) -> None:
        app = self.app
        flow = app.activation()
        try:
            flow.projections.rebuild(boot.get("epoch", "0"))
        except ValueError:
            log.warning("boot payload with an unreadable epoch %r", boot.get("epoch"))
        app.touch_flow()
        app._workflow_items = workflow_items(boot)
        self.tasks.workspaces = workspace_items(boot)
        held = app._tasks
        app._tasks = {
            t["id"]: merge_task(
                held.get(t["id"]), t, revision_at_read=summary_revision(held.get(t["id"]) or {})
            )
            for t in boot.get("tasks", [])
        }
        self.board.keep_board_choice()

    def set_tab_sessions(self, task_id: str, payload: Mapping[str, Any]) -> None:
        """A fresh session list: feed the projection store (newer revisions only, S06), cache
        it for clean activations, and show it if the task is still the active one."""
        rows = list(payload.get("sessions", []))
        app, view = self.app, self.view
        try:
            app.activation().projections.apply_sessions(sessions_from_json(payload))
        except ValueError:
            log.warning("unreadable session list for task %s", task_id)
        app.touch_flow()
        active = task_id == app.active_task_id
        held = view._tab_sessions if active else view._session_cache.get(task_id, [])
        if not is_newer_list(held, rows):
            # An older read finishing last: its projections were offered above (newer-only),
            # but its states and session set must not replace the newer list.
            return
        view._session_cache = {**view._session_cache, task_id: rows}
        if active:
            view._tab_sessions = rows
            self.overlay.show_bundles()

    def apply_session_view(
        self, ref: ViewRef, messages: list[dict[str, Any]], bundles: list[dict[str, Any]]
    ) -> None:
        if not self.view.apply_view_reads(ref, messages, bundles):
            return  # the user moved on; this read belongs to a view that is gone
        self.view.view_loading = False
        self.overlay.show_bundles()

    # -- what an activation decision does (in order) ----------------------------------------

    def release_layout(self) -> None:
        """Let go of the outgoing session's panels: transcript, overlay, composer state."""
        self.view.release()
        self.overlay.close()
        self.composer.composer_error = ""

    def select_task(self, task_id: str) -> None:
        app, view = self.app, self.view
        if task_id != app.active_task_id:
            app.active_task_id = task_id
            view._tab_sessions = list(view._session_cache.get(task_id, []))
            view.start_open = False
            view.start_error = ""

    def clear_task(self, task_id: str) -> None:
        """``task_id`` stays named by the route but shows no panel: this tab cannot see it
        (unknown, hidden or deleted)."""
        self.release_layout()
        self.app.active_session_id = ""
        self.app.active_task_id = task_id
        self.view._tab_sessions = []

    def open_session(self, task_id: str, session_id: str) -> ViewRef:
        """Make ``session_id`` the active session; the caller loads its transcript."""
        app = self.app
        if session_id != app.active_session_id or task_id != app.active_task_id:
            self.release_layout()
        else:
            self.view._view_gen += 1
        self.select_task(task_id)
        app.active_session_id = session_id
        app._remembered = {**app._remembered, task_id: session_id}
        self.view.view_loading = True
        return self.view.view_ref()

    def navigated(self, path: str, route_kind: str) -> None:
        """This tab's own navigation: its page load reads nothing again."""
        self.app._expect_path = path
        self.app.route_kind = route_kind

    def run_effects(
        self, decision: Decision, close_sheet: Callable[[str], None] | None = None
    ) -> Opened | None:
        opened: Opened | None = None
        for effect in decision.effects:
            if isinstance(effect, ReleaseLayout):
                self.release_layout()
            elif isinstance(effect, ClearActiveSession):
                self.app.active_session_id = ""
            elif isinstance(effect, OpenSession):
                ref = self.open_session(effect.task_id, effect.session_id)
                opened = Opened(session_path(effect.task_id, effect.session_id), ref)
            elif isinstance(effect, OpenTaskRoute):
                self.select_task(effect.task_id)
                self.app.active_session_id = ""
                opened = Opened(task_path(effect.task_id), self.view.view_ref())
            elif isinstance(effect, CloseSheet) and close_sheet is not None:
                close_sheet(effect.sheet_id)
        if opened is not None:
            self.navigated(opened.path, SESSION if opened.view.session_id else TASK)
        return opened

    # -- activation ----------------------------------------------------------------------------

    def begin_activation(self, task_id: str, surface: str) -> LoadTicket | None:
        app = self.app
        task = app._tasks.get(task_id)
        flow = app.activation()
        if task is None or flow.surface(surface) is None:
            return None
        ticket = flow.begin(TaskSummary.from_task(task), surface=surface)
        app.touch_flow()
        app.activating_task_id = task_id
        app._activating_gen = ticket.generation
        return ticket

    def settle_activation(
        self,
        ticket: LoadTicket,
        result: Any,
        close_sheet: Callable[[str], None] | None,
    ) -> Opened | None:
        """Apply the load's task read (newer summaries only), then let the flow decide."""
        app = self.app
        flow = app.activation()
        outcome: Any = result
        if isinstance(result, gateway.ActivationLoad):
            if flow.is_current(ticket):
                held = app._tasks.get(ticket.task_id)
                merged = (
                    None
                    if result.task is None
                    else merge_task(held, result.task, revision_at_read=ticket.summary_revision)
                )
                app.store_tasks({ticket.task_id: merged})
            outcome = result.sessions
        current = app._tasks.get(ticket.task_id)
        summary = TaskSummary.from_task(current) if current is not None else None
        decision = flow.settle(
            ticket,
            outcome,
            summary,
            remembered_session_id=app._remembered.get(ticket.task_id),
            active_session_id=app.active_session_id or None,
        )
        app.touch_flow()
        if app._activating_gen == ticket.generation:
            app.activating_task_id = ""  # the newest activation settled (spinner off)
        log.debug("activation of %s: %s (%s)", ticket.task_id, decision.kind, decision.reason)
        if decision.inert:
            return None
        if isinstance(outcome, Mapping) and ticket.task_id in app._tasks:
            self.set_tab_sessions(ticket.task_id, outcome)
        return self.run_effects(decision, close_sheet)

    # -- live updates --------------------------------------------------------------------------

    def apply_events(self, batch: list[Any]) -> tuple[EventPlan, ViewRef]:
        """In-memory part of a batch: projections first (S05), summaries (newer only),
        transcript rows of the active session; returns what must be re-read."""
        app, view = self.app, self.view
        flow = app.activation()
        plan = EventPlan()
        messages_changed = False
        for event in batch:
            kind, data = event.type, event.data
            if kind == OVERFLOW_EVENT:
                plan.merge(EventPlan.resync(set(app._tasks)))
                continue
            if kind in MESSAGE_EVENTS or kind == "session.updated":
                flow.projections.apply_event(data)
            if kind in ("task.status_summary.updated", "task.status_summary.invalidated"):
                tid = data.get("task_id", "")
                held = app._tasks.get(tid)
                updated = (
                    apply_summary(held, data.get("status_summary"))
                    if kind == "task.status_summary.updated"
                    else invalidate_summary(held, data.get("stale_revision"))
                )
                if updated is not None:
                    app.store_tasks({tid: updated})
            if (
                kind in MESSAGE_EVENTS
                and app.active_session_id
                and data.get("session_id") == app.active_session_id
                and isinstance(data.get("message"), Mapping)
            ):
                self._log_transcript_event(kind, data["message"])
                messages_changed = True
            plan.merge(
                plan_event(
                    kind,
                    data,
                    active_task_id=app.active_task_id,
                    active_session_id=app.active_session_id,
                    session_pending=flow.projections.pending_action(app.active_session_id),
                    showing_bundle=bool(view._bundles),
                    known_session_ids=frozenset(s["id"] for s in view._tab_sessions),
                )
            )
        app.touch_flow()
        if plan.discover_bundles:
            view._discovery_seq += 1
        if plan.stale_session_lists:
            view._session_cache = {
                tid: rows
                for tid, rows in view._session_cache.items()
                if tid not in plan.stale_session_lists
            }
        if messages_changed:
            self.overlay.show_bundles()
        app._revisions_at_read = {
            tid: summary_revision(app._tasks.get(tid) or {}) for tid in plan.reload_tasks
        }
        return plan, view.view_ref()

    def _log_transcript_event(self, kind: str, message: Mapping[str, Any]) -> None:
        """Apply a message event to the open transcript and keep it for replay over reads in
        flight (:meth:`SessionViewState.apply_view_reads`)."""
        view = self.view
        if kind == "session.message.deleted":
            view._messages = remove_message(view._messages, message.get("id", ""))
        else:
            view._messages = upsert_message(view._messages, message)
        view._event_seq += 1
        view._event_log = [
            *view._event_log[-(EVENT_LOG_LIMIT - 1) :],
            (view._event_seq, kind, dict(message)),
        ]

    def apply_reads(self, plan: EventPlan, ref: ViewRef, reads: EventReads) -> None:
        app = self.app
        if reads.tasks is not None:
            fresh, at_read = reads.tasks, app._revisions_at_read
            app.store_tasks(
                {
                    tid: (
                        merge_task(
                            app._tasks.get(tid), fresh[tid], revision_at_read=at_read.get(tid)
                        )
                        if tid in fresh
                        else None
                    )
                    for tid in plan.reload_tasks
                }
            )
            if app.active_task_id in plan.reload_tasks and app.active_task_id not in app._tasks:
                # The open task was deleted (or hidden): none of its panels stay on screen.
                self.clear_task(app.active_task_id)
        if reads.sessions is not None and ref.task_id == app.active_task_id:
            self.set_tab_sessions(ref.task_id, reads.sessions)
        changed = reads.messages is not None or reads.bundles is not None
        if changed and self.view.apply_view_reads(ref, reads.messages, reads.bundles):
            self.overlay.show_bundles()
