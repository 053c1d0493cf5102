"""One task activation, the same code for the desktop sidebar and every task sheet.

``begin`` under the lock → abort the loads it supersedes → the forced (pending task) or
cached (clean task) session load without the lock → ``settle`` under the lock and run its
effects → navigate → load the opened session's transcript and bundle. The decisions are
:class:`~state.activation.ActivationFlow`'s; the lock discipline is this module's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import reflex as rx

from state import gateway
from state.live import INFLIGHT
from state.session_view import ViewRef
from state.workspace import TabState, Workspace

log = logging.getLogger(__name__)


class ActivationOwner(TabState, Protocol):
    """The state proxy of the background handler that runs an activation: any state of the
    tab (a panel, or a task sheet's component state); ``async with`` takes the tab's lock."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: object) -> Any: ...


async def load_view_into(owner: ActivationOwner, ref: ViewRef) -> None:
    """Read a session's transcript and active bundles, then show them if the tab still shows
    that session."""
    try:
        messages, bundles = await gateway.session_view(ref.session_id)
    except Exception as error:
        log.warning("loading session %s failed: %r", ref.session_id, error)
        messages, bundles = [], []
    async with owner:
        (await Workspace.of(owner)).apply_session_view(ref, messages, bundles)


async def drive_activation(
    owner: ActivationOwner,
    task_id: str,
    surface: str,
    *,
    close_sheet: Callable[[str], None] | None = None,
) -> AsyncIterator[Any]:
    """Activate ``task_id`` from ``surface`` (``DESKTOP`` or a sheet's id);
    ``close_sheet(sheet_id)`` closes the sheet a ``CloseSheet`` effect names."""
    async with owner:
        workspace = await Workspace.of(owner)
        ticket = workspace.begin_activation(task_id, surface)
        token = workspace.app.client_token()
        cached = workspace.view._session_cache.get(task_id)
    if ticket is None:
        return
    INFLIGHT.abort(token, ticket.supersedes)
    if ticket.force or cached is None:
        result: Any = await INFLIGHT.run(token, ticket.generation, gateway.activation_load(task_id))
    else:
        result = {"sessions": cached}
    async with owner:
        workspace = await Workspace.of(owner)
        opened = workspace.settle_activation(ticket, result, close_sheet)
    if opened is None:
        return
    yield rx.redirect(opened.path)
    if opened.view.session_id:
        await load_view_into(owner, opened.view)
