"""Page shells: one responsive layout for every route (not a separate phone site).

Three layout classes (``state/layout.py``): desktop (``md`` = 62em = 992px and up): sidebar +
main area. Tablet (``sm`` = 768px up to ``md``): a top bar with Tasks / Board / New task, the
route's content full width. Phone (below 768px): a top bar, the content full width and a fixed
bottom navigation. On phones and tablets the home page shows the task list itself, other routes
hide it (the "Tasks" button opens the task-switcher sheet instead).

The chrome follows CSS breakpoints (right at first paint). The task sheets follow the tab's
*reported* layout class (``components/viewport.py`` → ``AppState.layout_class``): the phone
sheet is mounted only on a phone, the tablet sheet only on a tablet, none on a desktop. A layout
change therefore unmounts one sheet instance and mounts the other (S13), and an open sheet
never lingers over the desktop layout.
"""

from __future__ import annotations

import reflex as rx

from components.board import board
from components.phone import bottom_nav, top_bar
from components.sidebar import sidebar
from components.task_sheet import TaskSheet
from components.task_view import home_body, task_view
from components.theme import BOTTOM_NAV_HEIGHT, space
from components.viewport import layout_listener
from state.app_state import AppState
from state.layout import PHONE, TABLET
from state.navigation import NavigationState
from state.task_list import TaskListState
from state.ui_models import WorkspaceItem


def _workspace_option(workspace: rx.Var[WorkspaceItem]) -> rx.Component:
    return rx.el.option(workspace.name, value=workspace.id)


def new_task_dialog() -> rx.Component:
    """The "New task" form (title, description, workspace)."""
    return rx.dialog.root(
        rx.dialog.content(
            rx.dialog.title("New task"),
            rx.dialog.description(
                "It starts in the first step of the workspace's workflow.",
                size="2",
                color_scheme="gray",
                margin_bottom=space(3),
            ),
            rx.form(
                rx.flex(
                    rx.el.label(
                        rx.text("Title", size="2", weight="medium"),
                        rx.input(
                            name="title",
                            id="new-task-title",
                            placeholder="e.g. Fix the flaky upload test",
                            required=True,
                            max_length=200,
                            auto_focus=True,
                            size="2",
                        ),
                        display="flex",
                        flex_direction="column",
                        gap=space(1),
                    ),
                    rx.el.label(
                        rx.text("Description", size="2", weight="medium"),
                        rx.text_area(
                            name="description",
                            id="new-task-description",
                            placeholder="Anything the agent should know (optional)",
                            rows="3",
                            size="2",
                        ),
                        display="flex",
                        flex_direction="column",
                        gap=space(1),
                    ),
                    rx.el.label(
                        rx.text("Workspace", size="2", weight="medium"),
                        rx.el.select(
                            rx.foreach(TaskListState.workspaces, _workspace_option),
                            name="workspace_id",
                            id="new-task-workspace",
                            style={
                                "height": "var(--space-6)",
                                "padding": "0 var(--space-2)",
                                "borderRadius": "var(--radius-2)",
                                "border": f"1px solid {rx.color('gray', 7)}",
                                "background": "var(--color-surface)",
                                "color": "inherit",
                                "font": "inherit",
                            },
                        ),
                        display="flex",
                        flex_direction="column",
                        gap=space(1),
                    ),
                    rx.cond(
                        TaskListState.new_task_error != "",
                        rx.text(TaskListState.new_task_error, size="2", color_scheme="red"),
                    ),
                    rx.flex(
                        rx.dialog.close(
                            rx.button("Cancel", type="button", variant="soft", color_scheme="gray")
                        ),
                        rx.button(
                            "Create task", type="submit", loading=TaskListState.new_task_busy
                        ),
                        justify="end",
                        spacing="2",
                        margin_top=space(2),
                    ),
                    direction="column",
                    spacing="3",
                ),
                on_submit=NavigationState.submit_new_task,
                reset_on_submit=True,
                aria_label="New task",
            ),
            max_width="480px",
            id="new-task-dialog",
        ),
        open=TaskListState.new_task_open,
        on_open_change=TaskListState.set_new_task_open,
    )


def page(kind: str) -> rx.Component:
    """The shell for ``kind`` in ``home``, ``task``, ``session``, ``board``."""
    phone_sheet = TaskSheet.create(variant="phone")
    tablet_sheet = TaskSheet.create(variant="tablet")
    if kind == "home":
        main_content = home_body()
    elif kind == "board":
        main_content = board()
    else:
        main_content = task_view(with_session=kind == "session")
    return rx.box(
        rx.flex(
            top_bar(kind, tablet_sheet),
            rx.flex(
                sidebar(kind),
                rx.el.main(
                    main_content,
                    display=rx.breakpoints(initial="none" if kind == "home" else "flex", md="flex"),
                    flex_direction="column",
                    flex="1",
                    min_width="0",
                    min_height="0",
                    height="100%",
                    background_color=rx.color("gray", 1),
                ),
                flex="1",
                min_height="0",
                width="100%",
            ),
            direction="column",
            height=rx.breakpoints(initial=f"calc(100dvh - {BOTTOM_NAV_HEIGHT})", sm="100dvh"),
            width="100%",
            overflow="hidden",
        ),
        bottom_nav(phone_sheet, kind),
        # Mounted by the reported layout class, not hidden by CSS: see the module docstring.
        rx.cond(AppState.layout_class == PHONE, phone_sheet),
        rx.cond(AppState.layout_class == TABLET, tablet_sheet),
        layout_listener(),
        new_task_dialog(),
        width="100%",
        max_width="100vw",
        overflow_x="hidden",
    )


def sheets_test_page() -> rx.Component:
    """Test-only (``KANDEV_TEST_API=1``): two phone task sheets mounted at once (S43).

    The responsive layout never mounts two sheets in one tab, so this page does, with the
    production ``TaskSheet``: the first sheet's footer opens the second one on top of it.
    """
    second = TaskSheet.create(
        variant="phone",
        sheet_id="second-sheet",
        title="Second sheet",
        row_prefix="second-sheet-task-row",
    )
    first = TaskSheet.create(
        variant="phone",
        sheet_id="first-sheet",
        title="First sheet",
        row_prefix="first-sheet-task-row",
        footer=rx.button(
            "Open the second sheet",
            type="button",
            variant="soft",
            on_click=second.State.set_open(True),
        ),
    )
    return rx.box(
        rx.heading("Two task sheets", size="4"),
        rx.text("A test page: both sheets are mounted all the time.", size="2"),
        rx.button(
            "Open the first sheet",
            type="button",
            on_click=first.State.set_open(True),
            margin_top=space(3),
        ),
        first,
        second,
        padding=space(4),
    )
