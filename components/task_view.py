"""The task view: header, session tabs, transcript, overlay and composer.

The parts live in ``components/session_tabs.py``, ``components/transcript.py`` and
``components/composer.py``; this module composes them with the task header and the empty
states. Locators: the task title ``#task-title``, the "New session" button
``#new-session-button``.
"""

from __future__ import annotations

import reflex as rx

from components.composer import composer, start_session_form
from components.overlay import clarification_overlay
from components.session_tabs import session_tabs
from components.theme import badge, icon_tile, space, state_icon
from components.transcript import chat_notice, transcript
from state.app_state import AppState
from state.session_view import SessionViewState
from state.task_list import TaskListState


def task_header() -> rx.Component:
    task = AppState.active_task
    return rx.flex(
        rx.flex(
            rx.flex(
                state_icon(task.state, size=18),
                rx.heading(
                    task.title,
                    as_="h2",
                    size=rx.breakpoints(initial="4", md="5"),
                    weight="bold",
                    overflow_wrap="anywhere",
                    id="task-title",
                ),
                align="center",
                spacing="2",
                min_width="0",
                display=rx.breakpoints(initial="none", md="flex"),
            ),
            rx.flex(
                rx.text(task.workspace_name, size="1", color_scheme="gray"),
                badge(task.step_name, "indigo", aria_label=f"Step: {task.step_name}"),
                rx.cond(
                    task.pending_action != "",
                    badge(
                        rx.cond(
                            task.pending_action == "permission",
                            "Waiting for permission",
                            "Waiting for your answer",
                        ),
                        "amber",
                    ),
                ),
                align="center",
                spacing="2",
                wrap="wrap",
            ),
            direction="column",
            spacing="1",
            min_width="0",
            flex="1",
        ),
        rx.button(
            rx.icon("plus", size=14),
            rx.text("New session", display=rx.breakpoints(initial="none", sm="inline")),
            size="2",
            variant="soft",
            on_click=SessionViewState.toggle_start,
            aria_label="New session",
            id="new-session-button",
        ),
        align=rx.breakpoints(initial="center", md="start"),
        justify="between",
        spacing="3",
        padding_x=rx.breakpoints(initial=space(3), md=space(5)),
        padding_top=rx.breakpoints(initial=space(2), md=space(4)),
        padding_bottom=space(2),
    )


def _empty(icon: str, title: str, text: rx.Var[str] | str, *extra: rx.Component) -> rx.Component:
    return rx.center(
        rx.flex(
            icon_tile(icon, "accent", size=22, box="44px", radius=4, shade=10),
            rx.heading(title, as_="h2", size="4"),
            rx.text(text, size="2", color_scheme="gray", text_align="center", max_width="360px"),
            *extra,
            direction="column",
            align="center",
            spacing="3",
        ),
        flex="1",
        padding=space(6),
        min_height="0",
    )


def no_session_body() -> rx.Component:
    """The task-only route: no session selected (fallback, or a task without sessions)."""
    return _empty(
        "messages-square",
        "No session selected",
        rx.cond(
            SessionViewState.tabs.length() > 0,
            rx.cond(
                AppState.active_task.pending_action != "",
                "A session of this task is waiting for you. Pick a session above.",
                "Pick a session above, or start a new one.",
            ),
            "This task has no sessions yet. Start one to hand it to an agent.",
        ),
        rx.cond(
            ~SessionViewState.start_open,
            rx.button(
                rx.icon("play", size=14),
                "Start a session",
                on_click=SessionViewState.set_start_open(True),
                variant="soft",
            ),
        ),
    )


def task_view(with_session: bool) -> rx.Component:
    """The task route (``with_session=False``) or the session route."""
    body = (
        rx.fragment(
            transcript(),
            rx.box(
                chat_notice(),
                clarification_overlay(),
                max_width="860px",
                width="100%",
                margin_x="auto",
                flex_shrink="1",
                min_height="0",
                display="flex",
                flex_direction="column",
            ),
            composer(),
        )
        if with_session
        else rx.fragment(chat_notice(), no_session_body())
    )
    return rx.cond(
        AppState.active_task.id != "",
        rx.flex(
            task_header(),
            session_tabs(),
            rx.cond(SessionViewState.start_open, start_session_form()),
            body,
            direction="column",
            flex="1",
            min_height="0",
            width="100%",
        ),
        rx.cond(
            AppState.loaded,
            _empty("search-x", "Task not found", "It may have been removed, or you cannot see it."),
            rx.center(rx.spinner(size="3"), flex="1"),
        ),
    )


def home_body() -> rx.Component:
    return _empty(
        "mouse-pointer-click",
        "Pick a task",
        rx.cond(
            TaskListState.pending_count > 0,
            "Tasks with a question mark are waiting for your answer.",
            "Choose a task on the left to see its sessions.",
        ),
    )
