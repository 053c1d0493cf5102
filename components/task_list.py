"""Workspace cards with their task rows.

Locators for tests: ``#workspace-<id>`` (a ``section`` named by its heading),
``#task-row-<id>`` (role ``listitem``, named after the task) and the ``Pending question`` icon.
Rows stack their parts on phones and sit on one line from the ``sm`` breakpoint up.

Style props take CSS values (hence ``space(n)``); ``spacing`` on ``rx.flex`` takes Radix tokens.
"""

from __future__ import annotations

import reflex as rx

from state.workspace import TaskItem, WorkspaceItem, WorkspaceState

_DIVIDER = f"1px solid {rx.color('gray', 4)}"


def space(step: int) -> str:
    """The Radix spacing scale as a CSS value (1 = 4px, 2 = 8px, 3 = 12px, 4 = 16px ...)."""
    return f"var(--space-{step})"


def pending_question_icon(task: rx.Var[TaskItem]) -> rx.Component:
    """Shown when the task's session waits for the user's answer."""
    return rx.cond(
        task.pending_action != "",
        rx.tooltip(
            rx.icon(
                "circle-help",
                size=18,
                color=rx.color("amber", 10),
                flex_shrink="0",
                role="img",
                aria_label="Pending question",
                aria_hidden="false",
                data_testid="pending-question",
            ),
            content=task.pending_hint,
        ),
    )


def state_badge(task: rx.Var[TaskItem]) -> rx.Component:
    return rx.badge(
        task.state_label,
        color_scheme=task.state_color,
        variant="soft",
        radius="full",
        size="1",
        white_space="nowrap",
        aria_label=f"State: {task.state_label}",
        data_testid="task-state",
    )


def step_label(task: rx.Var[TaskItem]) -> rx.Component:
    return rx.flex(
        rx.icon("columns-3", size=14, color=rx.color("gray", 9), flex_shrink="0"),
        rx.text(task.step_name, size="2", color_scheme="gray", data_testid="task-step"),
        align="center",
        spacing="1",
        aria_label=f"Step: {task.step_name}",
    )


def task_row(task: rx.Var[TaskItem]) -> rx.Component:
    return rx.flex(
        rx.flex(
            pending_question_icon(task),
            rx.text(
                task.title,
                size="3",
                weight="medium",
                overflow_wrap="anywhere",
                data_testid="task-title",
            ),
            align="center",
            spacing="2",
            min_width="0",
            flex="1",
        ),
        rx.flex(
            step_label(task),
            state_badge(task),
            align="center",
            spacing="3",
            flex_shrink="0",
            wrap="wrap",
        ),
        direction=rx.breakpoints(initial="column", sm="row"),
        align=rx.breakpoints(initial="start", sm="center"),
        justify="between",
        spacing=rx.breakpoints(initial="1", sm="4"),
        padding_x=space(4),
        padding_y=space(3),
        border_top=_DIVIDER,
        _hover={"background_color": rx.color("gray", 2)},
        id=f"task-row-{task.id}",
        role="listitem",
        aria_label=task.title,
    )


def _task_count(workspace: rx.Var[WorkspaceItem]) -> rx.Component:
    count = workspace.tasks.length()
    return rx.badge(
        rx.cond(count == 1, "1 task", f"{count} tasks"),
        variant="surface",
        color_scheme="gray",
        radius="full",
        white_space="nowrap",
    )


def workspace_card(workspace: rx.Var[WorkspaceItem]) -> rx.Component:
    heading_id = f"workspace-heading-{workspace.id}"
    return rx.el.section(
        rx.flex(
            rx.flex(
                rx.icon("folder-kanban", size=20, color="var(--accent-9)", flex_shrink="0"),
                rx.heading(
                    workspace.name,
                    as_="h2",
                    size="4",
                    weight="bold",
                    overflow_wrap="anywhere",
                    id=heading_id,
                ),
                align="center",
                spacing="2",
                min_width="0",
            ),
            _task_count(workspace),
            align="center",
            justify="between",
            spacing="3",
            padding_x=space(4),
            padding_y=space(3),
            background_color=rx.color("gray", 2),
        ),
        rx.cond(
            workspace.tasks.length() > 0,
            rx.box(
                rx.foreach(workspace.tasks, task_row),
                role="list",
                aria_label=f"Tasks in {workspace.name}",
            ),
            rx.text(
                "No tasks yet.",
                size="2",
                color_scheme="gray",
                padding_x=space(4),
                padding_y=space(3),
                border_top=_DIVIDER,
            ),
        ),
        id=f"workspace-{workspace.id}",
        aria_labelledby=heading_id,
        background_color="var(--color-panel-solid)",
        border=f"1px solid {rx.color('gray', 5)}",
        border_radius="var(--radius-4)",
        box_shadow="var(--shadow-2)",
        overflow="hidden",
        width="100%",
    )


def _message(icon: str, text: rx.Var[str] | str, color: str) -> rx.Component:
    return rx.callout(text, icon=icon, color_scheme=color, variant="surface", width="100%")


def workspace_list() -> rx.Component:
    """All workspaces, or a loading / empty / error message."""
    return rx.cond(
        WorkspaceState.loaded,
        rx.cond(
            WorkspaceState.load_error != "",
            _message("triangle-alert", WorkspaceState.load_error, "red"),
            rx.cond(
                WorkspaceState.has_workspaces,
                rx.flex(
                    rx.foreach(WorkspaceState.workspaces, workspace_card),
                    direction="column",
                    spacing="5",
                    width="100%",
                ),
                _message("info", "No workspaces yet.", "gray"),
            ),
        ),
        rx.flex(
            rx.spinner(size="3"),
            rx.text("Loading workspaces…", color_scheme="gray"),
            align="center",
            justify="center",
            spacing="3",
            padding_y=space(9),
            role="status",
        ),
    )
