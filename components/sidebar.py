"""The task list: the desktop sidebar (full width on a phone's home page) and its rows.

Locators for tests: ``#task-row-<id>`` (a button named after the task), with the
``Pending question`` image only when the task's summary advertises an action; phone sheets reuse
the rows as ``#sheet-task-row-<id>``. The list (``[data-testid=task-groups]``) is
``aria-busy="true"`` while a task activation of the tab is in flight.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import reflex as rx

from components.theme import DIVIDER, brand_mark, pending_icon, section_label, space, state_icon
from state.app_state import AppState
from state.navigation import NavigationState
from state.task_list import TaskListState
from state.ui_models import StepGroup, TaskRow


def task_row(
    task: rx.Var[TaskRow],
    *,
    id_prefix: str = "task-row",
    on_click: Callable[[rx.Var[str]], Any] | None = None,
) -> rx.Component:
    """One task: state icon, title, workspace; the question icon when something waits."""
    active = AppState.active_task_id == task.id
    handler = on_click(task.id) if on_click is not None else NavigationState.activate_task(task.id)
    return rx.el.button(
        rx.box(
            rx.cond(
                AppState.activating_task_id == task.id,
                rx.spinner(size="1"),
                state_icon(task.state),
            ),
            padding_top="2px",
            flex_shrink="0",
        ),
        rx.flex(
            rx.text(
                task.title,
                size="2",
                weight="medium",
                color=rx.cond(active, rx.color("accent", 12), rx.color("gray", 12)),
                overflow_wrap="anywhere",
                data_testid="task-title",
            ),
            rx.text(
                task.workspace_name,
                size="1",
                color_scheme="gray",
                data_testid="task-workspace",
            ),
            direction="column",
            spacing="0",
            flex="1",
            min_width="0",
            align="start",
        ),
        pending_icon(task.pending_action, task.pending_hint),
        type="button",
        id=f"{id_prefix}-{task.id}",
        aria_label=task.title,
        aria_current=rx.cond(active, "page", "false"),
        on_click=handler,
        display="flex",
        align_items="start",
        gap=space(3),
        width="100%",
        text_align="left",
        padding_x=space(3),
        padding_y=space(2),
        border_radius="var(--radius-3)",
        border="none",
        cursor="pointer",
        font="inherit",
        background_color=rx.cond(active, rx.color("accent", 3), "transparent"),
        _hover={"background_color": rx.cond(active, rx.color("accent", 4), rx.color("gray", 3))},
        _focus_visible={"outline": f"2px solid {rx.color('accent', 8)}", "outline_offset": "1px"},
    )


def step_section(
    group: rx.Var[StepGroup],
    *,
    id_prefix: str = "task-row",
    on_click: Callable[[rx.Var[str]], Any] | None = None,
) -> rx.Component:
    return rx.el.section(
        rx.flex(
            section_label(group.name),
            rx.text(group.tasks.length(), size="1", color_scheme="gray"),
            justify="between",
            align="center",
            padding_x=space(3),
            padding_bottom=space(1),
        ),
        rx.flex(
            rx.foreach(group.tasks, lambda t: task_row(t, id_prefix=id_prefix, on_click=on_click)),
            direction="column",
            spacing="1",
            role="list",
        ),
        aria_label=group.name,
        width="100%",
    )


def task_groups(
    *, id_prefix: str = "task-row", on_click: Callable[[rx.Var[str]], Any] | None = None
) -> rx.Component:
    """Every task by workflow step; loading, error and empty states included."""
    return rx.cond(
        AppState.loaded,
        rx.cond(
            AppState.load_error != "",
            rx.callout(AppState.load_error, icon="triangle-alert", color_scheme="red", size="1"),
            rx.cond(
                AppState.rows.length() > 0,
                rx.flex(
                    rx.foreach(
                        TaskListState.groups,
                        lambda g: step_section(g, id_prefix=id_prefix, on_click=on_click),
                    ),
                    direction="column",
                    spacing="4",
                    width="100%",
                    # "true" while a task activation of this tab is in flight (tests wait on it).
                    aria_busy=rx.cond(AppState.activating_task_id != "", "true", "false"),
                    data_testid="task-groups",
                ),
                rx.text("No tasks yet.", size="2", color_scheme="gray", padding=space(3)),
            ),
        ),
        rx.flex(
            rx.spinner(size="2"),
            rx.text("Loading tasks…", size="2", color_scheme="gray"),
            align="center",
            spacing="2",
            padding=space(3),
            role="status",
        ),
    )


def _nav_link(label: str, icon: str, href: str, current: bool) -> rx.Component:
    return rx.link(
        rx.flex(
            rx.icon(icon, size=16),
            rx.text(label, size="2", weight="medium"),
            align="center",
            spacing="2",
        ),
        href=href,
        underline="none",
        color=rx.color("accent", 11) if current else rx.color("gray", 11),
        background_color=rx.color("accent", 3) if current else "transparent",
        padding_x=space(3),
        padding_y=space(2),
        border_radius="var(--radius-3)",
        aria_current="page" if current else "false",
        _hover={"background_color": rx.color("gray", 3)},
    )


def sidebar_header(kind: str) -> rx.Component:
    """Brand, primary navigation and "New task" (desktop only; phones have a top bar)."""
    return rx.flex(
        rx.flex(
            rx.link(
                rx.flex(
                    brand_mark(28),
                    rx.heading("Kandev", as_="h1", size="4", weight="bold"),
                    align="center",
                    spacing="2",
                ),
                href="/",
                underline="none",
                color=rx.color("gray", 12),
            ),
            rx.button(
                rx.icon("plus", size=16),
                "New task",
                size="2",
                variant="soft",
                on_click=TaskListState.set_new_task_open(True),
                id="new-task-button",
            ),
            align="center",
            justify="between",
        ),
        rx.flex(
            _nav_link("Tasks", "list-todo", "/", kind != "board"),
            _nav_link("Board", "columns-3", "/board", kind == "board"),
            spacing="1",
            role="navigation",
            aria_label="Main",
        ),
        direction="column",
        spacing="3",
        padding=space(3),
        border_bottom=DIVIDER,
    )


def sidebar(kind: str) -> rx.Component:
    """The desktop sidebar; on a phone's home page the same list fills the screen."""
    return rx.el.aside(
        rx.box(sidebar_header(kind), display=rx.breakpoints(initial="none", md="block")),
        rx.box(
            rx.cond(
                TaskListState.pending_count > 0,
                rx.callout(
                    rx.cond(
                        TaskListState.pending_count == 1,
                        "1 task waits for your answer",
                        f"{TaskListState.pending_count} tasks wait for your answer",
                    ),
                    icon="circle-help",
                    color_scheme="amber",
                    size="1",
                    variant="surface",
                    margin_bottom=space(3),
                ),
            ),
            task_groups(),
            padding=space(2),
            overflow_y="auto",
            flex="1",
            min_height="0",
        ),
        id="sidebar",
        aria_label="Tasks",
        display=rx.breakpoints(initial="flex" if kind == "home" else "none", md="flex"),
        flex_direction="column",
        width=rx.breakpoints(initial="100%", md="300px"),
        flex_shrink="0",
        min_height="0",
        height="100%",
        border_right=rx.breakpoints(initial="none", md=DIVIDER),
        background_color=rx.color("gray", 2),
    )
