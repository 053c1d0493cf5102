"""The overlay: the active bundle of the open session, one question at a time.

``#clarification-overlay`` (role ``dialog``, named "Agent question"); options are toggle buttons
named by their label, in a group named "Options" (one may be picked) or "Options (several)"
(multi-select); free text ``#clarification-text-<message_id>``; buttons "Submit answer", "Skip",
and "Previous" / "Next" for bundles of several questions. Answers go through the respond
route's function; Skip sends ``rejected: true``; a 409 closes the overlay. An agent's
permission request shows the permission card instead (``components/permission_overlay.py``).
"""

from __future__ import annotations

import reflex as rx

from components.overlay_card import overlay_card, overlay_error
from components.permission_overlay import permission_overlay
from components.theme import space
from state.overlay import OverlayState
from state.ui_models import OptionItem


def _option(option: rx.Var[OptionItem]) -> rx.Component:
    question = OverlayState.current_question
    return rx.button(
        rx.cond(option.selected, rx.icon("check", size=14), rx.fragment()),
        option.label,
        type="button",
        size="2",
        variant=rx.cond(option.selected, "solid", "surface"),
        color_scheme=rx.cond(option.selected, "indigo", "gray"),
        aria_pressed=rx.cond(option.selected, "true", "false"),
        aria_label=option.label,
        on_click=OverlayState.pick_option(question.message_id, option.id),
        white_space="normal",
        height="auto",
        min_height="32px",
        padding_y=space(1),
        text_align="left",
        max_width="100%",
    )


def _pager() -> rx.Component:
    return rx.cond(
        OverlayState.question_count > 1,
        rx.flex(
            rx.text(
                f"{OverlayState.question_index + 1} of {OverlayState.question_count}",
                size="1",
                color_scheme="gray",
                white_space="nowrap",
            ),
            rx.icon_button(
                rx.icon("chevron-left", size=16),
                size="1",
                variant="soft",
                color_scheme="gray",
                aria_label="Previous",
                title="Previous question",
                disabled=OverlayState.question_index <= 0,
                on_click=OverlayState.previous_question,
            ),
            rx.icon_button(
                rx.icon("chevron-right", size=16),
                size="1",
                variant="soft",
                color_scheme="gray",
                aria_label="Next",
                title="Next question",
                disabled=OverlayState.question_index >= OverlayState.question_count - 1,
                on_click=OverlayState.next_question,
            ),
            align="center",
            spacing="2",
        ),
    )


def clarification_overlay() -> rx.Component:
    """The open session's active bundle: an agent's permission request gets its own card
    (``components/permission_overlay.py``), a clarification the question card below."""
    return rx.cond(OverlayState.is_permission, permission_overlay(), _question_card())


def _question_card() -> rx.Component:
    question = OverlayState.current_question
    busy = OverlayState.overlay_busy != ""
    return rx.cond(
        OverlayState.has_bundle,
        overlay_card(
            rx.text(
                question.question,
                size="3",
                weight="medium",
                as_="p",
                overflow_wrap="anywhere",
                id="clarification-question",
            ),
            rx.cond(
                question.options.length() > 0,
                rx.flex(
                    rx.cond(
                        question.multi_select,
                        rx.text("Pick all that apply.", size="1", color_scheme="gray"),
                        rx.fragment(),
                    ),
                    rx.flex(
                        rx.foreach(question.options, _option),
                        wrap="wrap",
                        spacing="2",
                        role="group",
                        aria_label=rx.cond(question.multi_select, "Options (several)", "Options"),
                    ),
                    direction="column",
                    spacing="1",
                ),
            ),
            rx.text_area(
                value=question.text,
                on_change=lambda value: OverlayState.set_answer_text(question.message_id, value),
                placeholder=rx.cond(
                    question.options.length() > 0,
                    "Add details, or answer in your own words…",
                    "Your answer…",
                ),
                id=f"clarification-text-{question.message_id}",
                aria_label="Your answer",
                rows="2",
                resize="vertical",
                width="100%",
                size="2",
            ),
            overlay_error(OverlayState.overlay_error),
            rx.flex(
                rx.button(
                    "Skip",
                    type="button",
                    variant="soft",
                    color_scheme="gray",
                    size="2",
                    loading=OverlayState.overlay_busy == "skip",
                    disabled=busy,
                    on_click=OverlayState.skip_question,
                ),
                rx.button(
                    rx.icon("send-horizontal", size=14),
                    "Submit answer",
                    type="button",
                    size="2",
                    loading=OverlayState.overlay_busy == "submit",
                    disabled=busy | ~OverlayState.can_submit,
                    on_click=OverlayState.submit_answer,
                ),
                justify="end",
                spacing="2",
            ),
            icon="message-circle-question",
            title="Agent question",
            element_id="clarification-overlay",
            header_extra=_pager(),
        ),
    )
