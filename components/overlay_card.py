"""The frame both overlay cards share (an agent's question, an agent's permission request):
a dialog above the composer with an icon, a heading, and the card's own content. One module,
so the two cards look alike on desktop and phone and cannot drift apart."""

from __future__ import annotations

import reflex as rx

from components.theme import icon_tile, space


def overlay_card(
    *children: rx.Component,
    icon: str,
    title: str,
    element_id: str,
    header_extra: rx.Component | None = None,
) -> rx.Component:
    """A dialog named ``title`` (``#element_id``) holding ``children`` under its heading."""
    return rx.box(
        rx.flex(
            rx.flex(
                icon_tile(icon, "amber", size=16, box="28px", radius=2, shade=11),
                rx.heading(title, as_="h3", size="2", weight="bold"),
                align="center",
                spacing="2",
            ),
            header_extra if header_extra is not None else rx.fragment(),
            justify="between",
            align="center",
            spacing="3",
        ),
        *children,
        id=element_id,
        role="dialog",
        aria_modal="false",
        aria_label=title,
        display="flex",
        flex_direction="column",
        gap=space(3),
        padding=space(4),
        margin_x=rx.breakpoints(initial=space(2), md=space(4)),
        margin_bottom=space(2),
        border_radius="var(--radius-4)",
        border=f"1px solid {rx.color('amber', 6)}",
        border_top=f"3px solid {rx.color('amber', 9)}",
        background_color="var(--color-panel-solid)",
        box_shadow="var(--shadow-4)",
        max_height=rx.breakpoints(initial="48dvh", md="52dvh"),
        overflow_y="auto",
        flex_shrink="1",
        min_height="0",
    )


def overlay_error(message: rx.Var[str]) -> rx.Component:
    """The card's error line (a retryable failure keeps the card open with it)."""
    return rx.cond(
        message != "",
        rx.callout(message, icon="triangle-alert", color_scheme="red", size="1", role="alert"),
    )
