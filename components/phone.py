"""Phone and tablet surfaces: the top bar and the navigation; the "Tasks" buttons open the
task-switcher sheet (``components/task_sheet.py``) the layout passes in.

Locators: phone — bottom navigation buttons "Tasks", "Board", "New task". Tablet — the top
bar's buttons "Tasks", "Board", "New task".
"""

from __future__ import annotations

from typing import Any

import reflex as rx

from components.theme import BOTTOM_NAV_HEIGHT, DIVIDER, brand_mark, space
from state.app_state import AppState
from state.task_list import TaskListState


def _nav_button(label: str, icon: str, **props: Any) -> rx.Component:
    return rx.el.button(
        rx.icon(icon, size=20),
        rx.text(label, size="1", weight="medium"),
        type="button",
        aria_label=label,
        display="flex",
        flex_direction="column",
        align_items="center",
        justify_content="center",
        gap="2px",
        flex="1",
        height="100%",
        border="none",
        background="transparent",
        cursor="pointer",
        font="inherit",
        **props,
    )


def bottom_nav(sheet: Any, kind: str) -> rx.Component:
    """Phones only: Tasks (opens this page's phone sheet), Board, New task."""
    return rx.el.nav(
        _nav_button(
            "Tasks",
            "list-todo",
            on_click=sheet.State.set_open(True),
            color=rx.color("accent", 11) if kind in ("home", "task") else rx.color("gray", 11),
            id="nav-tasks",
        ),
        _nav_button(
            "Board",
            "columns-3",
            on_click=rx.redirect("/board"),
            color=rx.color("accent", 11) if kind == "board" else rx.color("gray", 11),
            id="nav-board",
        ),
        _nav_button(
            "New task",
            "square-plus",
            on_click=TaskListState.set_new_task_open(True),
            color=rx.color("gray", 11),
            id="nav-new-task",
        ),
        aria_label="Phone navigation",
        display=rx.breakpoints(initial="flex", sm="none"),
        position="fixed",
        left="0",
        right="0",
        bottom="0",
        height=BOTTOM_NAV_HEIGHT,
        padding_bottom="env(safe-area-inset-bottom)",
        border_top=DIVIDER,
        background_color=rx.color("gray", 1),
        z_index="30",
    )


def _tablet_button(label: str, icon: str, current: bool, **props: Any) -> rx.Component:
    look: dict[str, Any] = (
        {"variant": "soft"} if current else {"variant": "ghost", "color_scheme": "gray"}
    )
    return rx.button(
        rx.icon(icon, size=16),
        label,
        type="button",
        size="2",
        **look,
        **props,
    )


def tablet_nav(sheet: Any, kind: str) -> rx.Component:
    """Tablets only, in the top bar: Tasks (opens this page's tablet sheet), Board, New task."""
    return rx.el.nav(
        _tablet_button(
            "Tasks",
            "list-todo",
            kind != "board",
            on_click=sheet.State.set_open(True),
            id="tablet-nav-tasks",
        ),
        _tablet_button(
            "Board",
            "columns-3",
            kind == "board",
            on_click=rx.redirect("/board"),
            id="tablet-nav-board",
        ),
        rx.button(
            rx.icon("plus", size=16),
            "New task",
            type="button",
            size="2",
            on_click=TaskListState.set_new_task_open(True),
            id="tablet-nav-new-task",
        ),
        aria_label="Tablet navigation",
        display=rx.breakpoints(initial="none", sm="flex"),
        align_items="center",
        gap=space(2),
        flex_shrink="0",
    )


def top_bar(kind: str, tablet_sheet: Any) -> rx.Component:
    """Phones and tablets: brand on the home page, the task's title and a way back elsewhere;
    tablets add their navigation on the right (phones have the bottom navigation)."""
    if kind in ("task", "session"):
        title: Any = rx.text(
            AppState.active_task.title,
            size="3",
            weight="bold",
            overflow="hidden",
            text_overflow="ellipsis",
            white_space="nowrap",
        )
        lead: Any = rx.link(
            rx.icon_button(
                rx.icon("chevron-left", size=20),
                variant="ghost",
                color_scheme="gray",
                aria_label="All tasks",
            ),
            href="/",
        )
    else:
        title = rx.heading("Kandev" if kind != "board" else "Board", size="4", weight="bold")
        lead = brand_mark(28)
    return rx.flex(
        lead,
        rx.box(title, flex="1", min_width="0"),
        tablet_nav(tablet_sheet, kind),
        align="center",
        spacing="3",
        padding_x=rx.breakpoints(initial=space(3), sm=space(4)),
        height=rx.breakpoints(initial="52px", sm="56px"),
        border_bottom=DIVIDER,
        background_color=rx.color("gray", 1),
        display=rx.breakpoints(initial="flex", md="none"),
        flex_shrink="0",
    )
