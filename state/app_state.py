"""The root of one browser tab's workspace state: the route, the layout class, the loaded
tasks (and the rows derived from them), which task and session are active, and the tab's
:class:`~state.activation.ActivationFlow`.

Each panel is a substate (``task_list``, ``board``, ``session_view`` with ``composer`` and
``overlay``); a change that spans panels runs in :class:`state.workspace.Workspace` under the
tab's state lock. The map is in docs/architecture.md (UI).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import reflex as rx

from state.activation import ActivationFlow
from state.layout import coerce_layout
from state.live import INFLIGHT
from state.ui_models import HOME, TaskRow, WorkflowItem, task_rows


class AppState(rx.State):
    """One browser tab's view of the workspace (the root every panel inherits from)."""

    loaded: bool = False
    load_error: str = ""
    route_kind: str = HOME
    #: ``phone`` / ``tablet`` / ``desktop`` as the browser reports it (``components/viewport.py``);
    #: ``""`` until then. It decides which task sheet is mounted (``state/layout.py``).
    layout_class: str = ""
    active_task_id: str = ""
    active_session_id: str = ""
    #: The task whose newest activation is still loading (the row's spinner).
    activating_task_id: str = ""

    # -- payloads the panels are built from (server only) ------------------------------------
    _flow: ActivationFlow | None = None
    _tasks: dict[str, dict[str, Any]] = {}  # noqa: RUF012 - how Reflex declares state vars
    _workflow_items: list[WorkflowItem] = []  # noqa: RUF012
    #: The session a task last showed, for its next clean activation.
    _remembered: dict[str, str] = {}  # noqa: RUF012
    #: A navigation this tab's own activation made (its page load reads nothing again).
    _expect_path: str = ""
    #: Summary revisions held when a live-event task re-read began (newer-only merge).
    _revisions_at_read: dict[str, int | None] = {}  # noqa: RUF012
    _activating_gen: int = 0

    @rx.var
    def rows(self) -> list[TaskRow]:
        return task_rows(self._tasks.values(), self._workflow_items)

    @rx.var
    def active_task(self) -> TaskRow:
        return next((r for r in self.rows if r.id == self.active_task_id), TaskRow())

    # -- helpers the panels and the workspace share (not event handlers) ---------------------

    def activation(self) -> ActivationFlow:
        if self._flow is None:
            self._flow = ActivationFlow()
        return self._flow

    def touch_flow(self) -> None:
        """The flow mutates in place; reassigning marks it changed (views derived from its
        projections recompute)."""
        self._flow = self._flow

    def client_token(self) -> str:
        return self.router.session.client_token

    def store_tasks(self, updated: Mapping[str, dict[str, Any] | None]) -> None:
        """Replace (value) or drop (``None``) tasks, keeping the list's order."""
        tasks = dict(self._tasks)
        for tid, value in updated.items():
            if value is None:
                tasks.pop(tid, None)
            else:
                tasks[tid] = value
        self._tasks = tasks

    # -- task sheets register as activation surfaces (components/task_sheet.py) --------------

    def mount_sheet(self, sheet_id: str) -> None:
        self.activation().mount_sheet(sheet_id)
        self.touch_flow()

    def leave_sheet(self, sheet_id: str, *, unmounted: bool) -> None:
        """The sheet closed (or left the page): its in-flight choice becomes inert and its
        load is aborted."""
        flow = self.activation()
        generation = flow.unmount_sheet(sheet_id) if unmounted else flow.close_sheet(sheet_id)
        self.touch_flow()
        if generation is not None:
            INFLIGHT.abort(self.client_token(), [generation])

    @rx.event
    def set_layout_class(self, value: str) -> None:
        """The browser's layout class changed (or a page mounted): unknown values are ignored."""
        layout = coerce_layout(value)
        if layout is not None and layout != self.layout_class:
            self.layout_class = layout
