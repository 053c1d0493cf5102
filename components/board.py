"""The workflow board: one column per step (``#board``, ``#board-step-<id>``).

Cards open their task. A card moves to another step by its "Move to" menu or, with a pointer, by
dragging it onto the column (``components/drag.py``); both go through the workflow guard, whose
refusal (a task with an open agent question cannot leave its step) is shown above the board. On
a phone the columns stack instead of scrolling sideways.
"""

from __future__ import annotations

import reflex as rx

from components.drag import DropColumn, draggable_card
from components.theme import pending_icon, space, state_icon
from state.board import BoardState
from state.navigation import NavigationState
from state.ui_models import BoardColumn, StepItem, TaskRow, WorkflowItem


def _move_menu(task: rx.Var[TaskRow], targets: rx.Var[list[StepItem]]) -> rx.Component:
    return rx.menu.root(
        rx.menu.trigger(
            rx.icon_button(
                rx.icon("arrow-right-left", size=14),
                size="1",
                variant="ghost",
                color_scheme="gray",
                aria_label=f"Move {task.title}",
                title="Move to another step",
            ),
        ),
        rx.menu.content(
            rx.text("Move to", size="1", color_scheme="gray", padding_x=space(2)),
            rx.foreach(
                targets,
                lambda step: rx.menu.item(
                    step.name, on_select=BoardState.move_task(task.id, step.id)
                ),
            ),
            size="1",
        ),
    )


def _card(task: rx.Var[TaskRow], targets: rx.Var[list[StepItem]]) -> rx.Component:
    return draggable_card(
        rx.el.button(
            rx.flex(
                state_icon(task.state, size=15),
                rx.text(task.title, size="2", weight="medium", overflow_wrap="anywhere"),
                pending_icon(task.pending_action, task.pending_hint, size=16),
                align="start",
                spacing="2",
            ),
            type="button",
            on_click=NavigationState.activate_task(task.id),
            aria_label=task.title,
            id=f"board-card-{task.id}",
            flex="1",
            min_width="0",
            text_align="left",
            background="transparent",
            border="none",
            padding="0",
            cursor="pointer",
            font="inherit",
            color="inherit",
        ),
        _move_menu(task, targets),
        align="start",
        spacing="2",
        padding=space(3),
        border_radius="var(--radius-3)",
        border=f"1px solid {rx.color('gray', 5)}",
        background_color="var(--color-panel-solid)",
        box_shadow="var(--shadow-1)",
        _hover={"border_color": rx.color("accent", 7)},
        cursor="grab",
        role="listitem",
        task_id=task.id,
        id=f"board-drag-{task.id}",
    )


def _column(column: rx.Var[BoardColumn]) -> rx.Component:
    return DropColumn.create(
        rx.flex(
            rx.heading(column.name, as_="h3", size="2", weight="bold"),
            rx.badge(column.tasks.length(), variant="soft", color_scheme="gray", radius="full"),
            justify="between",
            align="center",
            padding_bottom=space(2),
        ),
        rx.flex(
            rx.foreach(column.tasks, lambda t: _card(t, column.targets)),
            rx.cond(
                column.tasks.length() == 0,
                rx.text(
                    "Nothing here",
                    size="1",
                    color_scheme="gray",
                    padding=space(3),
                    text_align="center",
                    border=f"1px dashed {rx.color('gray', 6)}",
                    border_radius="var(--radius-3)",
                ),
            ),
            direction="column",
            spacing="2",
            role="list",
            aria_label=column.name,
        ),
        id=f"board-step-{column.id}",
        aria_label=column.name,
        step_id=column.id,
        on_drop=BoardState.drop_card.prevent_default,
        padding=space(3),
        border_radius="var(--radius-4)",
        background_color=rx.color("gray", 3),
        outline="2px dashed transparent",
        outline_offset="-2px",
        transition="outline-color 120ms, background-color 120ms",
        min_width="0",
        style={
            "&[data-drop-over]": {
                "outline_color": rx.color("accent", 8),
                "background_color": rx.color("accent", 3),
            }
        },
    )


def _workflow_option(wf: rx.Var[WorkflowItem]) -> rx.Component:
    return rx.select.item(f"{wf.workspace_name} · {wf.name}", value=wf.id)


def board() -> rx.Component:
    return rx.flex(
        rx.flex(
            rx.heading(
                "Board",
                as_="h2",
                size="5",
                weight="bold",
                display=rx.breakpoints(initial="none", md="block"),
            ),
            rx.select.root(
                rx.select.trigger(
                    aria_label="Workflow",
                    min_width="200px",
                    flex=rx.breakpoints(initial="1", md="0"),
                ),
                rx.select.content(rx.foreach(BoardState.workflows, _workflow_option)),
                value=BoardState.board_workflow_id,
                on_change=BoardState.choose_board,
                size="2",
            ),
            justify="between",
            align="center",
            wrap="wrap",
            spacing="3",
        ),
        rx.cond(
            BoardState.board_notice != "",
            rx.callout(
                BoardState.board_notice,
                icon="circle-help",
                color_scheme="amber",
                size="1",
                role="alert",
                id="board-notice",
            ),
        ),
        rx.grid(
            rx.foreach(BoardState.board_columns, _column),
            columns=rx.breakpoints(initial="1", sm="2", lg="4"),
            spacing="3",
            id="board",
            aria_label="Workflow board",
            width="100%",
            # Every column as tall as the longest: a card far down a long column can be
            # dropped sideways onto a short one.
            align_items="stretch",
        ),
        direction="column",
        spacing="4",
        padding=rx.breakpoints(initial=space(3), md=space(5)),
        width="100%",
        overflow_y="auto",
        flex="1",
        min_height="0",
    )
