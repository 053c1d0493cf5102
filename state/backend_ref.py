"""Where UI state finds the backend running in the same process.

``kandev_app.py`` builds the :class:`~backend.runtime.Runtime` and mounts its API; state code
imports this module instead of the app module (which imports the state modules: a cycle).
``set_runtime`` is called once at import of the app; ``get_runtime`` fails loudly before that.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from backend.runtime import Runtime

S = TypeVar("S")

_runtime: Runtime | None = None
_connected: Callable[[str], bool] | None = None
_modify: Callable[[str, type[Any]], AbstractAsyncContextManager[Any]] | None = None


def set_runtime(runtime: Runtime) -> None:
    global _runtime
    _runtime = runtime


def get_runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError("the Kandev runtime is not registered (kandev_app not imported?)")
    return _runtime


def set_connection_probe(probe: Callable[[str], bool]) -> None:
    """How live-update watchers learn that their browser tab went away (see
    ``state.watcher``); the app registers Reflex's socket table here."""
    global _connected
    _connected = probe


def is_connected(client_token: str) -> bool:
    """Whether a browser tab with this Reflex client token is connected now; ``True`` when no
    probe is registered (then only the watcher's own bounds stop it)."""
    return True if _connected is None else _connected(client_token)


def set_state_access(modify: Callable[[str, type[Any]], AbstractAsyncContextManager[Any]]) -> None:
    """How code outside Reflex events changes one tab's state: the app registers a wrapper of
    ``app.modify_state`` that yields the tab's instance of the given state class and sends the
    resulting delta to the browser."""
    global _modify
    _modify = modify


def tab_state(client_token: str, state_cls: type[S]) -> AbstractAsyncContextManager[S]:
    """Exclusive access to ``state_cls`` of the tab ``client_token`` (see
    :func:`set_state_access`)."""
    if _modify is None:
        raise RuntimeError("no state access registered (kandev_app not imported?)")
    return _modify(client_token, state_cls)
