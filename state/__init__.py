"""Reflex State classes: what the browser sees and does."""

from state.workspace import TaskItem, WorkspaceItem, WorkspaceState

__all__ = ["TaskItem", "WorkspaceItem", "WorkspaceState"]
