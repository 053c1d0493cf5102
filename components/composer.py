"""The composer under the transcript (``#composer`` and its "Send" button) and the "Start session"
form (``#start-session-form``, prompt ``#start-session-prompt``)."""

from __future__ import annotations

import reflex as rx

from components.theme import DIVIDER, space
from state.composer import ComposerState
from state.navigation import NavigationState
from state.session_view import SessionViewState


def composer() -> rx.Component:
    return rx.box(
        rx.box(
            rx.cond(
                SessionViewState.session_ended,
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
                            value=ComposerState.draft,
                            on_change=ComposerState.set_draft,
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
                            loading=ComposerState.composer_busy,
                            disabled=(ComposerState.draft.strip() == "")
                            | SessionViewState.session_busy,
                        ),
                        align="end",
                        spacing="2",
                    ),
                    on_submit=ComposerState.send_prompt,
                    reset_on_submit=False,
                    width="100%",
                ),
            ),
            rx.cond(
                SessionViewState.session_busy,
                rx.flex(
                    rx.spinner(size="1"),
                    rx.text("The agent is working…", size="1", color_scheme="gray"),
                    spacing="2",
                    align="center",
                    padding_top=space(1),
                ),
            ),
            rx.cond(
                ComposerState.composer_error != "",
                rx.text(
                    ComposerState.composer_error, size="1", color_scheme="red", padding_top=space(1)
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
            rx.flex(
                rx.text("Agent", as_="label", size="1", html_for="start-session-agent"),
                rx.select(
                    SessionViewState.agent_profiles,
                    name="agent_profile",
                    default_value=SessionViewState.agent_profile,
                    id="start-session-agent",
                    aria_label="Agent",
                    size="1",
                ),
                align="center",
                spacing="2",
            ),
            rx.cond(
                SessionViewState.start_error != "",
                rx.text(SessionViewState.start_error, size="1", color_scheme="red", role="alert"),
            ),
            rx.flex(
                rx.button(
                    "Cancel",
                    type="button",
                    variant="soft",
                    color_scheme="gray",
                    on_click=SessionViewState.set_start_open(False),
                ),
                rx.button("Start session", type="submit", loading=SessionViewState.start_busy),
                justify="end",
                spacing="2",
            ),
            direction="column",
            spacing="2",
        ),
        on_submit=NavigationState.start_session,
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
