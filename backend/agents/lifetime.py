"""Agent processes end with the backend process that started them.

An orderly stop closes every agent (``AcpExecutor.aclose``), but a backend killed outright
(``kill -9``, the OOM killer, a crashed worker) runs no cleanup: its agents would live on,
holding their session's workspace and talking to an MCP endpoint that is gone, and a resume
on another worker would start a second agent beside them. On Linux the kernel itself ends
them: each agent is started with ``PR_SET_PDEATHSIG`` = ``SIGTERM``, delivered when the backend
dies, and kept across the agent command's ``exec``. Elsewhere this is a no-op (the orderly stop
still applies).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1


def die_with_backend() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the started process receive ``SIGTERM`` when this process
    dies (``None`` where the platform has no such thing)."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    backend = os.getpid()

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != backend:  # the backend died before the signal was armed
            os._exit(1)

    return in_child
