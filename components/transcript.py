"""The session transcript (``#transcript``, role ``log``): one ``#message-<id>`` row per
message (chat bubbles, question and permission cards), and the chat notice above the composer."""

from __future__ import annotations

import reflex as rx

from components.theme import badge, space
from state.session_view import SessionViewState
from state.ui_models import MessageItem


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
            badge(message.status_label, message.status_color),
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
                SessionViewState.view_loading & (SessionViewState.messages.length() == 0),
                rx.center(rx.spinner(size="3"), padding=space(6), role="status"),
                rx.cond(
                    SessionViewState.messages.length() == 0,
                    rx.text("No messages yet.", size="2", color_scheme="gray", padding=space(4)),
                ),
            ),
            rx.foreach(SessionViewState.messages, message_row),
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
        SessionViewState.chat_notice != "",
        rx.box(
            rx.callout.root(
                rx.callout.icon(rx.icon("info", size=16)),
                rx.callout.text(SessionViewState.chat_notice),
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
