"""Shared look: spacing, borders, sizes and the state icons every surface uses.

Style props take CSS values (hence :func:`space`); ``spacing`` on ``rx.flex`` takes Radix
tokens. Layout classes (``state/layout.py``): phone below Reflex's ``sm`` breakpoint (48em =
768px), tablet from ``sm`` up to ``md`` (62em = 992px), desktop from ``md``.
"""

from __future__ import annotations

from typing import Any

import reflex as rx

SIDEBAR_WIDTH = "300px"
BOTTOM_NAV_HEIGHT = "64px"
DIVIDER = f"1px solid {rx.color('gray', 4)}"


def space(step: int) -> str:
    """The Radix spacing scale as a CSS value (1 = 4px, 2 = 8px, 3 = 12px, 4 = 16px ...)."""
    return f"var(--space-{step})"


def phone(value: Any, desktop: Any) -> Any:
    """A responsive value: ``value`` on phones, ``desktop`` from ``md`` up."""
    return rx.breakpoints(initial=value, md=desktop)


def brand_mark(size: int = 32) -> rx.Component:
    return rx.center(
        rx.icon("bot", size=int(size * 0.6), color="white"),
        width=f"{size}px",
        height=f"{size}px",
        border_radius="var(--radius-3)",
        background_color="var(--accent-9)",
        flex_shrink="0",
        aria_hidden="true",
    )


def icon_tile(
    icon: str, color: str, *, size: int, box: str, radius: int, shade: int
) -> rx.Component:
    """An icon (``shade`` of ``color``) on a square tinted with ``color`` (card headers,
    empty states): one look for both."""
    return rx.center(
        rx.icon(icon, size=size, color=rx.color(color, shade)),
        width=box,
        height=box,
        border_radius=f"var(--radius-{radius})",
        background_color=rx.color(color, 3),
        flex_shrink="0",
    )


def state_icon(state: rx.Var[str], size: int = 16) -> rx.Component:
    """The task state as an icon (with its name for screen readers)."""

    def icon(tag: str, color: str, label: str) -> rx.Component:
        return rx.icon(
            tag,
            size=size,
            color=rx.color(color, 10),
            flex_shrink="0",
            role="img",
            aria_label=f"State: {label}",
        )

    return rx.match(
        state,
        ("TODO", icon("circle-dashed", "gray", "To do")),
        ("BACKLOG", icon("circle-dashed", "gray", "Backlog")),
        ("IN_PROGRESS", icon("circle-dot", "blue", "In progress")),
        ("REVIEW", icon("eye", "amber", "In review")),
        ("DONE", icon("circle-check", "green", "Done")),
        ("FAILED", icon("circle-x", "red", "Failed")),
        icon("circle", "gray", "Unknown"),
    )


def pending_icon(
    pending_action: rx.Var[str], hint: rx.Var[str] | str = "", size: int = 18
) -> rx.Component:
    """The ``Pending question`` icon: shown only when the summary advertises an action."""
    return rx.cond(
        pending_action != "",
        rx.icon(
            "circle-help",
            size=size,
            color=rx.color("amber", 10),
            flex_shrink="0",
            role="img",
            aria_label="Pending question",
            aria_hidden="false",
            data_testid="pending-question",
            title=hint,
        ),
    )


def badge(text: rx.Var[str] | str, color: rx.Var[str] | str, **props: object) -> rx.Component:
    """A small soft pill: a task's step or waiting state, a request's status."""
    return rx.badge(
        text,
        color_scheme=color,
        variant="soft",
        radius="full",
        size="1",
        white_space="nowrap",
        **props,
    )


def section_label(text: rx.Var[str] | str, **props: Any) -> rx.Component:
    return rx.text(
        text,
        size="1",
        weight="medium",
        color_scheme="gray",
        text_transform="uppercase",
        letter_spacing="0.06em",
        **props,
    )
