"""A backend worker that dies is replaced; the others go on serving.

Why: ``reflex run --env prod`` serves through Granian, whose supervisor by default stops every
worker and exits as soon as one worker dies. With several workers that turns one crash (an
out-of-memory kill, a ``crash`` fault point) into an outage, although the other workers could
serve on and take over the dead one's work (``backend/runtime.py``'s sweep); with one worker it
leaves the app down until someone starts it again. Granian can replace a failed worker
(``respawn_failed_workers``), but Reflex builds its server without that option and reads no
setting for it, so :func:`respawn_failed_workers` makes it Granian's default. The replacement
is a fresh worker: a new worker id, start-up recovery of whatever the dead one left. Granian's
own crash-loop guard still stops the app when a replacement dies again within seconds.

``rxconfig.py`` calls it, so it runs in the Reflex command's process before the server starts.
"""

from __future__ import annotations

from typing import Any


def respawn_failed_workers() -> None:
    """Make the Granian server Reflex starts replace a worker that dies (idempotent)."""
    try:
        import granian.server as server
    except ImportError:  # Reflex serves through uvicorn without Granian: nothing to change
        return
    base: Any = server.Server
    if getattr(base, "kandev_respawns_failed_workers", False):
        return

    class RespawningServer(base):  # type: ignore[misc, valid-type]
        kandev_respawns_failed_workers = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("respawn_failed_workers", True)
            super().__init__(*args, **kwargs)

    RespawningServer.__name__ = RespawningServer.__qualname__ = base.__name__
    server.Server = RespawningServer
