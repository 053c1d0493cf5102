"""The Kandev Reflex app: pages, and the backend's REST API on the same port.

The Radix theme lives in ``rxconfig.py`` (Reflex 0.10 deprecates ``App(theme=...)``).
"""

from __future__ import annotations

import reflex as rx

from backend.api.app import create_api
from backend.db.engine import get_engine
from backend.runtime import Runtime
from components.task_list import space, workspace_list
from state.workspace import WorkspaceState

_PAGE_WIDTH = "960px"
_GUTTER = rx.breakpoints(initial=space(3), sm=space(6))


def header() -> rx.Component:
    return rx.el.header(
        rx.flex(
            rx.flex(
                rx.center(
                    rx.icon("bot", size=20, color="white"),
                    width="32px",
                    height="32px",
                    border_radius="var(--radius-3)",
                    background_color="var(--accent-9)",
                    flex_shrink="0",
                    aria_hidden="true",
                ),
                rx.heading("Kandev", as_="h1", size="6", weight="bold"),
                align="center",
                spacing="3",
            ),
            rx.text(
                "Tasks for coding agents",
                size="2",
                color_scheme="gray",
                display=rx.breakpoints(initial="none", sm="block"),
            ),
            align="center",
            justify="between",
            max_width=_PAGE_WIDTH,
            margin_x="auto",
            padding_x=_GUTTER,
            padding_y=space(3),
        ),
        position="sticky",
        top="0",
        z_index="10",
        background_color=rx.color("gray", 1),
        border_bottom=f"1px solid {rx.color('gray', 4)}",
    )


def index() -> rx.Component:
    return rx.box(
        header(),
        rx.el.main(
            rx.heading(
                "Workspaces",
                as_="h2",
                size="2",
                weight="medium",
                color_scheme="gray",
                text_transform="uppercase",
                letter_spacing="0.06em",
                margin_bottom=space(3),
            ),
            workspace_list(),
            max_width=_PAGE_WIDTH,
            margin_x="auto",
            padding_x=_GUTTER,
            padding_y=rx.breakpoints(initial=space(4), sm=space(6)),
        ),
        min_height="100vh",
        background_color=rx.color("gray", 2),
    )


runtime = Runtime(get_engine(), owns_engine=True)

app = rx.App(
    api_transformer=create_api(runtime),
    head_components=[rx.el.link(rel="icon", href="/favicon.svg", type="image/svg+xml")],
)
app.register_lifespan_task(runtime.lifespan)
app.add_page(
    index,
    route="/",
    title="Kandev",
    description="Hand tasks to coding agents and answer the questions they ask.",
    on_load=WorkspaceState.load,
)
