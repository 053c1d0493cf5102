"""What moves the tab between tasks and sessions: the page load of every route, a task picked
in the sidebar or a sheet (activation), a session tab, a started session, a created task.

Each runs as one :class:`~state.workspace.Workspace` change under the tab's lock; handlers
that wait on the backend are background handlers, so a slow load never holds the lock and a
newer activation can supersede an older one meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import reflex as rx

from state import gateway
from state.activation import DESKTOP
from state.activation_driver import drive_activation, load_view_into
from state.app_state import AppState
from state.ui_models import (
    BOARD,
    HOME,
    SESSION,
    TASK,
    merge_task,
    parse_route,
    session_path,
    task_path,
)
from state.watcher import ensure_watcher
from state.workspace import Workspace

log = logging.getLogger(__name__)


class NavigationState(AppState):
    """The event handlers that change which task and session the tab shows."""

    @rx.event
    async def load_page(self) -> None:
        """Every route's ``on_load``: start live updates, then load what the URL names.

        A navigation this tab's own activation just made is not reloaded (the activation
        already loaded it), so activation stays one round of reads.
        """
        route = parse_route(self.router.url.path)
        self.route_kind = route.kind
        ensure_watcher(self.client_token())
        path = self.router.url.path.rstrip("/") or "/"
        if self._expect_path and path == self._expect_path and self.loaded:
            self._expect_path = ""
            return
        self._expect_path = ""
        try:
            boot = await gateway.boot()
        except Exception as error:
            log.exception("loading the workspace failed")
            self.load_error = gateway.describe(error).message
            self.loaded = True
            return
        workspace = await Workspace.of(self)
        self.load_error = ""
        workspace.apply_boot(boot)
        workspace.view.set_agent_choices(*gateway.agent_choices())
        self.loaded = True
        if route.kind in (HOME, BOARD):
            self.activating_task_id = ""
            if self.active_session_id or self.active_task_id:
                workspace.release_layout()
            self.active_session_id = ""
            self.active_task_id = ""
            return
        if route.task_id not in self._tasks:
            workspace.clear_task(route.task_id)
            return
        try:
            payload = await gateway.sessions(route.task_id)
        except Exception as error:
            log.warning("loading sessions of %s failed: %r", route.task_id, error)
            payload = {"sessions": workspace.view._session_cache.get(route.task_id, [])}
        workspace.select_task(route.task_id)
        workspace.set_tab_sessions(route.task_id, payload)
        known = {s["id"] for s in payload.get("sessions", [])}
        if route.kind == SESSION and route.session_id in known:
            view = workspace.open_session(route.task_id, route.session_id)
            try:
                messages, bundles = await gateway.session_view(route.session_id)
            except Exception as error:
                log.warning("loading session %s failed: %r", route.session_id, error)
                messages, bundles = [], []
            workspace.apply_session_view(view, messages, bundles)
        else:
            workspace.release_layout()
            self.active_session_id = ""

    @rx.event(background=True)
    async def activate_task(self, task_id: str) -> AsyncIterator[Any]:
        """The user picked a task in the desktop sidebar."""
        async for event in drive_activation(self, task_id, DESKTOP):
            yield event

    @rx.event(background=True)
    async def open_session(self, session_id: str) -> AsyncIterator[Any]:
        """A session tab: an explicit choice, remembered for the task's next clean activation."""
        async with self:
            workspace = await Workspace.of(self)
            task_id = self.active_task_id
            if not task_id or all(s["id"] != session_id for s in workspace.view._tab_sessions):
                return
            view = workspace.open_session(task_id, session_id)
            path = session_path(task_id, session_id)
            workspace.navigated(path, SESSION)
        yield rx.redirect(path)
        await load_view_into(self, view)

    @rx.event(background=True)
    async def start_session(self, form_data: dict[str, Any]) -> AsyncIterator[Any]:
        """ "Start session": a new session of the active task with its first prompt."""
        prompt_text = str(form_data.get("prompt", "")).strip()
        agent_profile = str(form_data.get("agent_profile", "")) or None
        async with self:
            workspace = await Workspace.of(self)
            task_id = self.active_task_id
            if not task_id or not workspace.view.begin_start(prompt_text):
                return
        try:
            created = await gateway.start_session(task_id, prompt_text, agent_profile)
            payload = await gateway.sessions(task_id)
        except Exception as exc:
            async with self:
                (await Workspace.of(self)).view.end_start(gateway.describe(exc).message)
            return
        async with self:
            workspace = await Workspace.of(self)
            workspace.view.end_start()
            if self.active_task_id != task_id:
                return
            workspace.set_tab_sessions(task_id, payload)
            view = workspace.open_session(task_id, created["id"])
            path = session_path(task_id, created["id"])
            workspace.navigated(path, SESSION)
        yield rx.redirect(path)
        await load_view_into(self, view)

    @rx.event(background=True)
    async def submit_new_task(self, form_data: dict[str, Any]) -> AsyncIterator[Any]:
        """The new-task form: create the task, then open it with the start form showing."""
        title = str(form_data.get("title", "")).strip()
        description = str(form_data.get("description", ""))
        workspace_id = str(form_data.get("workspace_id", "")) or None
        async with self:
            if not (await Workspace.of(self)).tasks.begin_new_task(title):
                return
        try:
            created = await gateway.new_task(title, description, workspace_id)
        except Exception as exc:
            async with self:
                (await Workspace.of(self)).tasks.end_new_task(gateway.describe(exc).message)
            return
        async with self:
            workspace = await Workspace.of(self)
            workspace.tasks.end_new_task()
            self.store_tasks({created["id"]: merge_task(self._tasks.get(created["id"]), created)})
            workspace.release_layout()
            self.active_session_id = ""
            workspace.select_task(created["id"])
            workspace.view._tab_sessions = []
            workspace.view.start_open = True
            path = task_path(created["id"])
            workspace.navigated(path, TASK)
        yield rx.redirect(path)
