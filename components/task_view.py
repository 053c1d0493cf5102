"""The task view: header, session tabs, transcript, overlay and composer.

Locators: session tabs ``#session-tab-<id>`` (role ``tab``), ``#transcript`` (role ``log``)
with ``#message-<id>`` rows, ``#composer`` (textarea) and its "Send" button, the
"Start session" form (``#start-session-form``, prompt ``#start-session-prompt``).
"""

from __future__ import annotations

import reflex as rx

from components.overlay import clarification_overlay
from components.theme import DIVIDER, pending_icon, space, state_icon
from state.app_state import AppState
from state.ui_models import MessageItem, SessionTab


def _badge(text: rx.Var[str] | str, color: rx.Var[str] | str, **props: object) -> rx.Component:
    return rx.badge(
        text,
        color_scheme=color,
        variant="soft",
        radius="full",
        size="1",
        white_space="nowrap",
        **props,
    )


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
                _badge(task.step_name, "indigo", aria_label=f"Step: {task.step_name}"),
                rx.cond(
                    task.pending_action != "",
                    _badge(
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
            on_click=AppState.toggle_start,
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


def _tab(tab: rx.Var[SessionTab]) -> rx.Component:
    selected = AppState.active_session_id == tab.id
    return rx.el.button(
        rx.cond(
            tab.is_primary,
            rx.icon("star", size=13, color=rx.color("gray", 9), aria_hidden="true"),
        ),
        rx.text(tab.label, size="2", weight=rx.cond(selected, "bold", "medium")),
        rx.box(
            width="7px",
            height="7px",
            border_radius="50%",
            background_color=rx.color(tab.state_color, 9),
            title=tab.state_label,
            aria_hidden="true",
            flex_shrink="0",
        ),
        pending_icon(tab.pending_action, size=15),
        type="button",
        role="tab",
        id=f"session-tab-{tab.id}",
        aria_selected=rx.cond(selected, "true", "false"),
        aria_label=f"{tab.label} ({tab.state_label})",
        on_click=AppState.open_session(tab.id),
        display="flex",
        align_items="center",
        gap=space(2),
        padding_x=space(3),
        padding_y=space(2),
        border="none",
        border_bottom=rx.cond(
            selected, f"2px solid {rx.color('accent', 9)}", "2px solid transparent"
        ),
        background_color="transparent",
        color=rx.cond(selected, rx.color("gray", 12), rx.color("gray", 11)),
        cursor="pointer",
        font="inherit",
        white_space="nowrap",
        flex_shrink="0",
        _hover={"color": rx.color("gray", 12), "background_color": rx.color("gray", 2)},
    )


def session_tabs() -> rx.Component:
    return rx.flex(
        rx.foreach(AppState.tabs, _tab),
        role="tablist",
        aria_label="Sessions",
        spacing="1",
        overflow_x="auto",
        padding_x=rx.breakpoints(initial=space(2), md=space(4)),
        border_bottom=DIVIDER,
        flex_shrink="0",
        min_height="41px",
    )


# -- transcript ------------------------------------------------------------------------------


def _bubble(message: rx.Var[MessageItem], mine: bool) -> rx.Component:
    return rx.flex(
        rx.cond(
            mine,
            rx.fragment(),
            rx.center(
                rx.icon("bot", size=14, color=rx.color("accent", 11)),
                width="26px",
                height="26px",
                border_radius="50%",
                background_color=rx.color("accent", 3),
                flex_shrink="0",
                aria_hidden="true",
            ),
        ),
        rx.box(
            rx.text(
                message.content,
                size="2",
                white_space="pre-wrap",
                overflow_wrap="anywhere",
                as_="p",
            ),
            padding_x=space(3),
            padding_y=space(2),
            border_radius="var(--radius-4)",
            background_color=rx.color("accent", 3) if mine else rx.color("gray", 3),
            max_width=rx.breakpoints(initial="85%", md="70%"),
        ),
        justify="end" if mine else "start",
        align="start",
        spacing="2",
        width="100%",
    )


def _request_card(message: rx.Var[MessageItem], icon: str, title: str) -> rx.Component:
    return rx.flex(
        rx.flex(
            rx.flex(
                rx.icon(icon, size=15, color=rx.color("amber", 11)),
                rx.text(title, size="1", weight="bold", color_scheme="gray"),
                align="center",
                spacing="2",
            ),
            _badge(message.status_label, message.status_color),
            justify="between",
            align="center",
            spacing="2",
        ),
        rx.text(message.content, size="2", weight="medium", overflow_wrap="anywhere", as_="p"),
        rx.cond(
            message.detail != "",
            rx.text(message.detail, size="1", color_scheme="gray", overflow_wrap="anywhere"),
        ),
        rx.cond(
            message.answer != "",
            rx.flex(
                rx.icon("corner-down-right", size=13, color=rx.color("green", 10)),
                rx.text(message.answer, size="2", overflow_wrap="anywhere"),
                spacing="1",
                align="center",
            ),
        ),
        direction="column",
        spacing="1",
        padding=space(3),
        border_radius="var(--radius-3)",
        border=f"1px solid {rx.color('gray', 5)}",
        border_left=rx.cond(
            message.waiting,
            f"3px solid {rx.color('amber', 9)}",
            f"3px solid {rx.color('gray', 6)}",
        ),
        background_color="var(--color-panel-solid)",
        width="100%",
        max_width="560px",
        opacity=rx.cond(message.status_label == "No longer active", "0.75", "1"),
    )


def message_row(message: rx.Var[MessageItem]) -> rx.Component:
    return rx.box(
        rx.match(
            message.kind,
            ("user", _bubble(message, mine=True)),
            ("agent", _bubble(message, mine=False)),
            ("question", _request_card(message, "circle-help", "Question")),
            ("permission", _request_card(message, "shield-question", "Permission request")),
            rx.center(
                rx.text(message.content, size="1", color_scheme="gray"),
                width="100%",
            ),
        ),
        id=f"message-{message.id}",
        data_kind=message.kind,
        title=message.created_at,
        width="100%",
    )


def transcript() -> rx.Component:
    return rx.auto_scroll(
        rx.flex(
            rx.cond(
                AppState.view_loading & (AppState.messages.length() == 0),
                rx.center(rx.spinner(size="3"), padding=space(6), role="status"),
                rx.cond(
                    AppState.messages.length() == 0,
                    rx.text("No messages yet.", size="2", color_scheme="gray", padding=space(4)),
                ),
            ),
            rx.foreach(AppState.messages, message_row),
            direction="column",
            spacing="3",
            padding_x=rx.breakpoints(initial=space(3), md=space(5)),
            padding_y=space(4),
            max_width="860px",
            margin_x="auto",
            width="100%",
        ),
        id="transcript",
        role="log",
        aria_label="Transcript",
        aria_live="polite",
        flex="1",
        min_height="0",
        width="100%",
    )


def chat_notice() -> rx.Component:
    return rx.cond(
        AppState.chat_notice != "",
        rx.box(
            rx.callout.root(
                rx.callout.icon(rx.icon("info", size=16)),
                rx.callout.text(AppState.chat_notice),
                color_scheme="amber",
                size="1",
                variant="surface",
                role="status",
                id="chat-notice",
            ),
            padding_x=rx.breakpoints(initial=space(2), md=space(4)),
            padding_bottom=space(2),
            flex_shrink="0",
        ),
    )


def composer() -> rx.Component:
    return rx.box(
        rx.box(
            rx.cond(
                AppState.session_ended,
                rx.text(
                    "This session has ended. Start a new session to keep going.",
                    size="2",
                    color_scheme="gray",
                    as_="p",
                    text_align="center",
                ),
                rx.form(
                    rx.flex(
                        rx.text_area(
                            value=AppState.draft,
                            on_change=AppState.set_draft,
                            placeholder="Message the agent…",
                            id="composer",
                            name="content",
                            aria_label="Message the agent",
                            rows="1",
                            auto_height=True,
                            enter_key_submit=True,
                            resize="none",
                            flex="1",
                            size="2",
                            min_height="40px",
                            max_height="160px",
                        ),
                        rx.button(
                            rx.icon("arrow-up", size=16),
                            rx.text("Send", display=rx.breakpoints(initial="none", sm="inline")),
                            type="submit",
                            size="2",
                            aria_label="Send",
                            loading=AppState.composer_busy,
                            disabled=(AppState.draft.strip() == "") | AppState.session_busy,
                        ),
                        align="end",
                        spacing="2",
                    ),
                    on_submit=AppState.send_prompt,
                    reset_on_submit=False,
                    width="100%",
                ),
            ),
            rx.cond(
                AppState.session_busy,
                rx.flex(
                    rx.spinner(size="1"),
                    rx.text("The agent is working…", size="1", color_scheme="gray"),
                    spacing="2",
                    align="center",
                    padding_top=space(1),
                ),
            ),
            rx.cond(
                AppState.composer_error != "",
                rx.text(
                    AppState.composer_error, size="1", color_scheme="red", padding_top=space(1)
                ),
            ),
            max_width="828px",
            margin_x="auto",
        ),
        padding_x=rx.breakpoints(initial=space(2), md=space(4)),
        padding_y=space(3),
        border_top=DIVIDER,
        background_color=rx.color("gray", 1),
        flex_shrink="0",
        width="100%",
    )


def start_session_form() -> rx.Component:
    return rx.form(
        rx.flex(
            rx.heading("Start session", as_="h3", size="3"),
            rx.text(
                "Give the agent its first prompt. Tip: “/ask Question? | Option A | Option B” "
                "makes the mock agent ask you a question.",
                size="1",
                color_scheme="gray",
            ),
            rx.text_area(
                name="prompt",
                id="start-session-prompt",
                placeholder="What should the agent do?",
                aria_label="Prompt",
                rows="3",
                width="100%",
                auto_focus=True,
            ),
            rx.cond(
                AppState.start_error != "",
                rx.text(AppState.start_error, size="1", color_scheme="red", role="alert"),
            ),
            rx.flex(
                rx.button(
                    "Cancel",
                    type="button",
                    variant="soft",
                    color_scheme="gray",
                    on_click=AppState.set_start_open(False),
                ),
                rx.button("Start session", type="submit", loading=AppState.start_busy),
                justify="end",
                spacing="2",
            ),
            direction="column",
            spacing="2",
        ),
        on_submit=AppState.start_session,
        reset_on_submit=True,
        id="start-session-form",
        aria_label="Start session",
        padding=space(4),
        margin_x=rx.breakpoints(initial=space(2), md=space(4)),
        margin_top=space(3),
        border=f"1px solid {rx.color('gray', 5)}",
        border_radius="var(--radius-4)",
        background_color="var(--color-panel-solid)",
        box_shadow="var(--shadow-2)",
        flex_shrink="0",
    )


def _empty(icon: str, title: str, text: rx.Var[str] | str, *extra: rx.Component) -> rx.Component:
    return rx.center(
        rx.flex(
            rx.center(
                rx.icon(icon, size=22, color=rx.color("accent", 10)),
                width="44px",
                height="44px",
                border_radius="var(--radius-4)",
                background_color=rx.color("accent", 3),
            ),
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
            AppState.tabs.length() > 0,
            rx.cond(
                AppState.active_task.pending_action != "",
                "A session of this task is waiting for you. Pick a session above.",
                "Pick a session above, or start a new one.",
            ),
            "This task has no sessions yet. Start one to hand it to an agent.",
        ),
        rx.cond(
            ~AppState.start_open,
            rx.button(
                rx.icon("play", size=14),
                "Start a session",
                on_click=AppState.set_start_open(True),
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
            rx.cond(AppState.start_open, start_session_form()),
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
            AppState.pending_count > 0,
            "Tasks with a question mark are waiting for your answer.",
            "Choose a task on the left to see its sessions.",
        ),
    )
