"""UI pieces: functions returning ``rx.Component``."""

from components.task_list import task_row, workspace_card, workspace_list

__all__ = ["task_row", "workspace_card", "workspace_list"]
