"""An agent process dies with the worker that started it.

Why: a worker that crashes (SIGKILL, OOM) runs no cleanup, and an agent left behind goes on
running: it may still be editing the task's files while another worker takes the session
over and starts a new agent for it (``backend/agents/routing.py``), and it holds its memory
until the machine restarts. An ACP agent is expected to exit when its stdin closes, but not
every agent does while a tool call is in flight. So the kernel is asked to do it: on Linux
the agent's command runs under ``setpriv --pdeathsig TERM`` (util-linux), which sets the
process's parent-death signal and then ``exec``s the command (same pid, nothing in between).

Where ``setpriv`` is missing (macOS, a minimal container), agents start as before and a
warning says once that they outlive a crashed worker there.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import shutil
import sys
from collections.abc import Sequence

log = logging.getLogger(__name__)

#: The signal the kernel sends the agent when its worker dies: it may still exit cleanly.
PARENT_DEATH_SIGNAL = "TERM"


@functools.cache
def _setpriv() -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    found = shutil.which("setpriv")
    if found is None:
        log.warning(
            "setpriv (util-linux) not found: agent processes will outlive a worker that crashes"
        )
    return found


def bound_to_worker(
    command: Sequence[str], *, path: str | None = None, cwd: str | None = None
) -> list[str]:
    """``command`` run so that the agent gets SIGTERM when this process dies (see module).

    The program is looked up as ``exec`` would in the child (``path``: its ``PATH``;
    ``cwd``: its working directory, for a relative name), so one that is not there raises
    ``FileNotFoundError`` here, as starting it directly would, instead of a wrapper that
    starts and then fails to ``exec`` it."""
    setpriv = _setpriv()
    if setpriv is None or not command:
        return list(command)
    name = command[0]
    if os.sep in name and not os.path.isabs(name):
        name = os.path.normpath(os.path.join(cwd or os.getcwd(), name))
    program = shutil.which(name, path=path)
    if program is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command[0])
    return [setpriv, f"--pdeathsig={PARENT_DEATH_SIGNAL}", "--", program, *command[1:]]
