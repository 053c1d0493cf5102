"""The session tabs under the task header: one tab per session (``#session-tab-<id>``, role
``tab``) with its state dot and pending-question icon, in a ``Sessions`` tab list."""

from __future__ import annotations

import reflex as rx

from components.theme import DIVIDER, pending_icon, space
from state.app_state import AppState
from state.navigation import NavigationState
from state.session_view import SessionViewState
from state.ui_models import SessionTab


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
        on_click=NavigationState.open_session(tab.id),
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
        rx.foreach(SessionViewState.tabs, _tab),
        role="tablist",
        aria_label="Sessions",
        spacing="1",
        overflow_x="auto",
        padding_x=rx.breakpoints(initial=space(2), md=space(4)),
        border_bottom=DIVIDER,
        flex_shrink="0",
        min_height="41px",
    )
