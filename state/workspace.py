"""The workspace overview: every workspace with its tasks, read from the backend's database."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable

import reflex as rx

from backend.catalog import TaskView, WorkspaceView, list_workspaces_with_tasks
from backend.db.engine import get_engine

logger = logging.getLogger(__name__)

#: Badge colour per task state; anything else is gray.
_STATE_COLORS = {
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
_PENDING_HINTS = {
    "clarification": "The agent asked a question and waits for your answer",
    "permission": "The agent asks for permission and waits for your answer",
}


@dataclasses.dataclass
class TaskItem:
    """One task row as the browser gets it (plain data, serialised into the page state)."""

    id: str
    title: str
    state: str
    state_label: str
    state_color: str
    step_name: str
    pending_action: str = ""
    pending_hint: str = ""


@dataclasses.dataclass
class WorkspaceItem:
    id: str
    name: str
    tasks: list[TaskItem] = dataclasses.field(default_factory=list)


def _state_label(state: str) -> str:
    """``IN_PROGRESS`` -> ``In progress``."""
    return state.replace("_", " ").strip().capitalize()


def task_item(view: TaskView) -> TaskItem:
    state = str(view.state)
    pending = view.pending_action or ""
    hint = _PENDING_HINTS.get(pending, "The agent waits for your answer") if pending else ""
    return TaskItem(
        id=view.id,
        title=view.title,
        state=state,
        state_label=_state_label(state),
        state_color=_STATE_COLORS.get(state.upper(), "gray"),
        step_name=view.step_name,
        pending_action=pending,
        pending_hint=hint,
    )


def workspace_items(views: Iterable[WorkspaceView]) -> list[WorkspaceItem]:
    """The backend's ``WorkspaceView`` values as browser-friendly items."""
    return [
        WorkspaceItem(id=v.id, name=v.name, tasks=[task_item(t) for t in v.tasks]) for v in views
    ]


class WorkspaceState(rx.State):
    """Workspaces and their tasks for the index page."""

    workspaces: list[WorkspaceItem] = []  # noqa: RUF012 - how Reflex declares state vars
    loaded: bool = False
    load_error: str = ""

    @rx.event
    async def load(self) -> None:
        try:
            views = await list_workspaces_with_tasks(get_engine())
        except Exception:
            logger.exception("loading workspaces failed")
            self.load_error = "Could not load workspaces. Is the database migrated?"
        else:
            self.workspaces = workspace_items(views)
            self.load_error = ""
        self.loaded = True

    @rx.var
    def has_workspaces(self) -> bool:
        return len(self.workspaces) > 0
