"""The permission card: an agent asks before a tool call (ACP ``session/request_permission``).

``#permission-overlay`` (role ``dialog``, named "Permission request"): the request's title
(``#permission-title``) and one button per option the agent offered, named by its label, in a
group named "Options"; a granting option (``allow_*``) is the solid one. A click sends exactly
that choice through the permission respond route's function; a 409 closes the card with a
notice (the agent stopped waiting, or a newer turn took over).
"""

from __future__ import annotations

import reflex as rx

from components.overlay_card import overlay_card, overlay_error
from state.overlay import OverlayState
from state.ui_models import OptionItem


def _option(option: rx.Var[OptionItem]) -> rx.Component:
    sending = (OverlayState.overlay_busy == "permit") & (OverlayState.permit_choice == option.id)
    return rx.button(
        option.label,
        type="button",
        size="2",
        variant=rx.cond(option.allows, "solid", "soft"),
        color_scheme=rx.cond(option.allows, "indigo", "gray"),
        aria_label=option.label,
        loading=sending,
        disabled=OverlayState.overlay_busy != "",
        on_click=OverlayState.choose_permission(option.id),
        white_space="normal",
        height="auto",
        min_height="32px",
        text_align="left",
        max_width="100%",
    )


def permission_overlay() -> rx.Component:
    request = OverlayState.current_question
    return rx.cond(
        OverlayState.is_permission,
        overlay_card(
            rx.text(
                request.question,
                size="3",
                weight="medium",
                as_="p",
                overflow_wrap="anywhere",
                id="permission-title",
            ),
            rx.flex(
                rx.foreach(request.options, _option),
                wrap="wrap",
                spacing="2",
                justify="end",
                role="group",
                aria_label="Options",
            ),
            overlay_error(OverlayState.overlay_error),
            icon="shield-question",
            title="Permission request",
            element_id="permission-overlay",
        ),
    )
