"""Live updates for one browser tab: the backend's bus events applied to its panels.

One plain asyncio task per tab (not a Reflex background handler: Reflex cancels a page load's
chained events when the tab navigates, which would stop live updates mid-read), bounded by
:data:`~state.live.WATCHERS`. Each batch is applied in two locked steps: the in-memory part
(projections first, S05), then the reads it asked for; see docs/architecture.md (UI).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any

from backend import failpoints
from state import gateway
from state.app_state import AppState
from state.backend_ref import get_runtime, is_connected, tab_state
from state.live import WATCHERS, WatchHandle, next_batch
from state.session_view import ViewRef
from state.ui_models import EventPlan
from state.workspace import EventReads, Workspace

log = logging.getLogger(__name__)

#: How often an idle watcher checks that its tab is still connected.
WATCH_POLL_S = 5.0
#: The fault point that holds live-update application (tests make an overlay stale with it).
UI_EVENTS_FAULT = "ui.events"


async def _read_for(plan: EventPlan, view: ViewRef) -> EventReads:
    """The reads a batch of events asked for; a failed read is skipped (the next event or
    page load converges) rather than shown as an empty list."""
    reads = EventReads()

    async def attempt(what: str, work: Any) -> Any:
        try:
            return await work
        except Exception as error:
            log.warning("live update: reading %s failed: %r", what, error)
            return None

    if plan.reload_tasks:
        reads.tasks = await attempt("tasks", gateway.tasks_by_id(plan.reload_tasks))
    if plan.reload_sessions and view.task_id:
        reads.sessions = await attempt("sessions", gateway.sessions(view.task_id))
    if plan.discover_bundles and view.session_id:
        reads.bundles = await attempt("bundles", gateway.bundles(view.session_id))
    if plan.reload_messages and view.session_id:
        reads.messages = await attempt("messages", gateway.messages(view.session_id))
    return reads


def ensure_watcher(token: str) -> None:
    """Start live updates for a tab unless they already run. An empty
    ``contextvars.Context`` keeps the triggering event's context out of the task."""
    if WATCHERS.running(token):
        return
    handle = WATCHERS.claim(token)
    if handle is None:
        log.warning("live updates refused for a tab: watcher limit reached")
        return
    handle.task = asyncio.create_task(_watch(handle), context=contextvars.Context())


async def _watch(handle: WatchHandle) -> None:
    """Apply the backend's bus events to one tab for as long as it is connected."""
    token = handle.token
    try:
        async with get_runtime().bus.subscribe() as queue:
            while WATCHERS.keep_going(handle, is_connected):
                batch = await next_batch(queue, WATCH_POLL_S)
                if not batch:
                    continue
                await failpoints.hit(UI_EVENTS_FAULT)
                async with tab_state(token, AppState) as app:
                    plan, view = (await Workspace.of(app)).apply_events(batch)
                if not plan.needs_io:
                    continue
                reads = await _read_for(plan, view)
                async with tab_state(token, AppState) as app:
                    (await Workspace.of(app)).apply_reads(plan, view, reads)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("live updates for a tab failed; the next page load restarts them")
    finally:
        WATCHERS.release(handle)
        log.debug("live updates stopped for a tab; %d watchers left", len(WATCHERS))
