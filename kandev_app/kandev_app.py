"""The Kandev Reflex app: the workspace UI, and the backend's REST API on the same port.

The backend runs in this process: ``runtime`` is registered with ``state.backend_ref`` so UI
state calls the same functions the HTTP routes use. The Radix theme lives in ``rxconfig.py``
(Reflex 0.10 deprecates ``App(theme=...)``).

Routes: ``/`` (desktop: sidebar + task view; phone: task list + bottom navigation),
``/tasks/[task_id]`` (the task-only route), ``/tasks/[task_id]/sessions/[session_id]`` and
``/board``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import reflex as rx

from backend.api.app import create_api
from backend.db.engine import get_engine
from backend.heap import settle_for_serving
from backend.runtime import Runtime
from components.layout import page, sheets_test_page
from state.backend_ref import set_connection_probe, set_runtime, set_state_access
from state.live import WATCHERS
from state.navigation import NavigationState

_DESCRIPTION = "Hand tasks to coding agents and answer the questions they ask."

runtime = Runtime(get_engine(), owns_engine=True, lock_process=True)
set_runtime(runtime)

app = rx.App(
    api_transformer=create_api(runtime),
    head_components=[rx.el.link(rel="icon", href="/favicon.svg", type="image/svg+xml")],
)
app.register_lifespan_task(runtime.lifespan)


@asynccontextmanager
async def _live_updates() -> AsyncIterator[None]:
    """Live-update watchers are plain tasks: cancel them when the app stops. Registered after
    the runtime, so the start-up heap is complete when it is frozen (``backend.heap``)."""
    settle_for_serving()
    try:
        yield
    finally:
        await WATCHERS.stop_all()


app.register_lifespan_task(_live_updates)


def _connected(client_token: str) -> bool:
    """Whether a tab with this token has a live socket (live-update watchers stop otherwise)."""
    namespace = app.event_namespace
    return namespace is None or client_token in namespace.token_to_sid


@asynccontextmanager
async def _tab_state(client_token: str, state_cls: type[Any]) -> AsyncIterator[Any]:
    """One tab's ``state_cls`` under its lock; the delta goes to the browser on exit."""
    async with app.modify_state(rx.BaseStateToken(ident=client_token, cls=state_cls)) as root:
        yield await root.get_state(state_cls)


set_connection_probe(_connected)
set_state_access(_tab_state)


def index() -> rx.Component:
    return page("home")


def task_page() -> rx.Component:
    return page("task")


def session_page() -> rx.Component:
    return page("session")


def board_page() -> rx.Component:
    return page("board")


for _component, _route, _title in (
    (index, "/", "Kandev"),
    (task_page, "/tasks/[task_id]", "Task · Kandev"),
    (session_page, "/tasks/[task_id]/sessions/[session_id]", "Session · Kandev"),
    (board_page, "/board", "Board · Kandev"),
):
    app.add_page(
        _component,
        route=_route,
        title=_title,
        description=_DESCRIPTION,
        on_load=NavigationState.load_page,
    )

if runtime.settings.test_api:
    # Two task sheets mounted at once (S43's browser test); only with the test API on.
    app.add_page(
        sheets_test_page,
        route="/testing/sheets",
        title="Sheets (test) · Kandev",
        on_load=NavigationState.load_page,
    )
