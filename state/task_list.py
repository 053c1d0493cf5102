"""The task list (desktop sidebar, phone and tablet sheets) and the new-task form.

Its rows come from the root's loaded tasks, grouped by workflow step; picking a row runs an
activation (``state/navigation.py``)."""

from __future__ import annotations

import reflex as rx

from state.app_state import AppState
from state.ui_models import StepGroup, WorkspaceItem, step_groups


class TaskListState(AppState):
    workspaces: list[WorkspaceItem] = []  # noqa: RUF012 - how Reflex declares state vars
    new_task_open: bool = False
    new_task_busy: bool = False
    new_task_error: str = ""

    @rx.var
    def groups(self) -> list[StepGroup]:
        return step_groups(self.rows)

    @rx.var
    def pending_count(self) -> int:
        return sum(1 for r in self.rows if r.pending_action)

    def begin_new_task(self, title: str) -> bool:
        """The new-task form was submitted: ``False`` when it is busy or has no title."""
        if self.new_task_busy:
            return False
        if not title:
            self.new_task_error = "Give the task a title."
            return False
        self.new_task_busy = True
        self.new_task_error = ""
        return True

    def end_new_task(self, error: str = "") -> None:
        """The create request ended: the form closes, or stays open with the error."""
        self.new_task_busy = False
        self.new_task_error = error
        if not error:
            self.new_task_open = False

    @rx.event
    def set_new_task_open(self, value: bool) -> None:
        self.new_task_open = value
        self.new_task_error = ""
