"""Where UI state finds the backend running in the same process.

``kandev_app.py`` builds the :class:`~backend.runtime.Runtime` and mounts its API; state code
imports this module instead of the app module (which imports the state modules: a cycle).
``set_runtime`` is called once at import of the app; ``get_runtime`` fails loudly before that.
"""

from __future__ import annotations

from collections.abc import Callable

from backend.runtime import Runtime

_runtime: Runtime | None = None
_connected: Callable[[str], bool] | None = None


def set_runtime(runtime: Runtime) -> None:
    global _runtime
    _runtime = runtime


def get_runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError("the Kandev runtime is not registered (kandev_app not imported?)")
    return _runtime


def set_connection_probe(probe: Callable[[str], bool]) -> None:
    """How live-update watchers learn that their browser tab went away (see
    ``state.watchers``); the app registers Reflex's socket table here."""
    global _connected
    _connected = probe


def is_connected(client_token: str) -> bool:
    """Whether a browser tab with this Reflex client token is connected now; ``True`` when no
    probe is registered (then only the watcher's own bounds stop it)."""
    return True if _connected is None else _connected(client_token)
