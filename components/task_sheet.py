"""The task-switcher sheet: a task list in a drawer, a bottom sheet on phones and a panel from the
left on tablets (``components/phone.py`` has the buttons that open it).

A sheet is an ``rx.ComponentState``: every instance has its own state class, and registers
itself with the tab's :class:`~state.activation.ActivationFlow` as its own surface when it
mounts, so two sheets never invalidate each other's in-flight task choice (S43), and an
unmounted sheet's continuation can neither navigate nor close a replacement (S13). Each page
has a phone sheet (a bottom sheet) and a tablet sheet (a panel from the left); the layout
(``components/layout.py``) mounts at most one of them, by the tab's reported layout class.
Picking a task runs the same activation driver as the desktop sidebar; the decision's
``CloseSheet`` effect closes exactly this instance.

Locators: phone — the sheet ``#task-sheet`` (role ``dialog``, named "Tasks") with rows
``#sheet-task-row-<id>``. Tablet — the sheet ``#tablet-task-sheet`` (role ``dialog``, named
"Task list") with rows ``#tablet-sheet-task-row-<id>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import reflex as rx

from components.sidebar import task_groups
from components.theme import space
from state.activation_driver import drive_activation
from state.app_state import AppState


class TaskSheet(rx.ComponentState):
    """One mounted task sheet (phone or tablet variant)."""

    open: bool = False

    def _close_if_mine(self, sheet_id: str) -> None:
        """The activation's ``CloseSheet`` effect: only the sheet it names closes."""
        if sheet_id == self.get_full_name():
            self.open = False

    @rx.event
    async def mounted(self) -> None:
        (await self.get_state(AppState)).mount_sheet(self.get_full_name())

    @rx.event
    async def unmounted(self) -> None:
        """The sheet left the page: its in-flight choice becomes inert and its load aborts."""
        (await self.get_state(AppState)).leave_sheet(self.get_full_name(), unmounted=True)
        self.open = False

    @rx.event
    async def set_open(self, value: bool) -> None:
        self.open = value
        if not value:
            (await self.get_state(AppState)).leave_sheet(self.get_full_name(), unmounted=False)

    @rx.event(background=True)
    async def pick(self, task_id: str) -> Any:
        """A task row of this sheet: the shared activation, with this sheet as the surface."""
        async for event in drive_activation(
            self, task_id, self.get_full_name(), close_sheet=self._close_if_mine
        ):
            yield event

    @classmethod
    def get_component(
        cls,
        *children: Any,
        variant: str = "phone",
        sheet_id: str | None = None,
        title: str | None = None,
        row_prefix: str | None = None,
        footer: rx.Component | None = None,
        **props: Any,
    ) -> rx.Component:
        """``variant``: ``phone`` (a bottom sheet) or ``tablet`` (a panel from the left);
        ``sheet_id`` / ``title`` / ``row_prefix`` override the variant's locators (the
        test-only two-sheet page); ``footer`` goes under the list."""
        look = SHEET_VARIANTS[variant]
        sheet_id = sheet_id or look.sheet_id
        title = title or look.title
        row_prefix = row_prefix or look.row_prefix
        handle: list[rx.Component] = []
        if look.direction == "bottom":
            handle.append(
                rx.box(
                    width="40px",
                    height="4px",
                    border_radius="2px",
                    background_color=rx.color("gray", 6),
                    margin_x="auto",
                    aria_hidden="true",
                )
            )
        return rx.box(
            rx.drawer.root(
                rx.drawer.overlay(z_index="40"),
                rx.drawer.portal(
                    rx.drawer.content(
                        rx.flex(
                            *handle,
                            rx.flex(
                                rx.drawer.title(title, size="4", weight="bold"),
                                rx.drawer.close(
                                    rx.icon_button(
                                        rx.icon("x", size=18),
                                        variant="ghost",
                                        color_scheme="gray",
                                        aria_label="Close",
                                    ),
                                ),
                                justify="between",
                                align="center",
                            ),
                            rx.drawer.description(
                                "Pick a task to open it.", size="1", color_scheme="gray"
                            ),
                            rx.box(
                                task_groups(id_prefix=row_prefix, on_click=cls.pick),
                                overflow_y="auto",
                                flex="1",
                                min_height="0",
                            ),
                            *([footer] if footer is not None else []),
                            *children,
                            direction="column",
                            spacing="2",
                            height="100%",
                        ),
                        id=sheet_id,
                        aria_label=title,
                        position="fixed",
                        padding=space(3),
                        z_index="50",
                        background_color="var(--color-panel-solid)",
                        box_shadow="var(--shadow-6)",
                        display="flex",
                        flex_direction="column",
                        **look.style,
                    ),
                ),
                open=cls.open,
                on_open_change=cls.set_open,
                direction=look.direction,
            ),
            on_mount=cls.mounted,
            on_unmount=cls.unmounted,
            display="contents",
            **props,
        )


@dataclass(frozen=True)
class SheetLook:
    """Where a task sheet comes from, its locators and its geometry."""

    sheet_id: str
    title: str
    row_prefix: str
    direction: str
    style: dict[str, str]


SHEET_VARIANTS: dict[str, SheetLook] = {
    # A bottom sheet on phones.
    "phone": SheetLook(
        sheet_id="task-sheet",
        title="Tasks",
        row_prefix="sheet-task-row",
        direction="bottom",
        style={
            "left": "0",
            "right": "0",
            "bottom": "0",
            "max_height": "85dvh",
            "width": "100%",
            "padding_top": space(2),
            "border_top_left_radius": "var(--radius-5)",
            "border_top_right_radius": "var(--radius-5)",
        },
    ),
    # A panel from the left on tablets (the desktop sidebar's place, on demand).
    "tablet": SheetLook(
        sheet_id="tablet-task-sheet",
        title="Task list",
        row_prefix="tablet-sheet-task-row",
        direction="left",
        style={
            "left": "0",
            "top": "0",
            "bottom": "0",
            "height": "100dvh",
            "width": "360px",
            "max_width": "85vw",
            "border_top_right_radius": "var(--radius-5)",
            "border_bottom_right_radius": "var(--radius-5)",
        },
    ),
}
