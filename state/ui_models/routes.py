"""Which page a URL path names: every path parses to a :class:`Route` (unknown ones are
home), and ``task_path`` / ``session_path`` build the paths ``parse_route`` reads back."""

from __future__ import annotations

import re
from dataclasses import dataclass

HOME = "home"
TASK = "task"
SESSION = "session"
BOARD = "board"

_SESSION_PATH = re.compile(r"^/tasks/([^/]+)/sessions/([^/]+)/?$")
_TASK_PATH = re.compile(r"^/tasks/([^/]+)/?$")


@dataclass(frozen=True, slots=True)
class Route:
    """Which page a URL path names; ids are ``""`` when the route has none."""

    kind: str
    task_id: str = ""
    session_id: str = ""


def parse_route(path: str) -> Route:
    """``/``, ``/board``, ``/tasks/<id>``, ``/tasks/<id>/sessions/<id>``; anything else is
    home. Query strings and fragments are ignored."""
    path = path.split("?", 1)[0].split("#", 1)[0] or "/"
    if match := _SESSION_PATH.match(path):
        return Route(SESSION, match.group(1), match.group(2))
    if match := _TASK_PATH.match(path):
        return Route(TASK, match.group(1))
    if path.rstrip("/") == "/board":
        return Route(BOARD)
    return Route(HOME)


def task_path(task_id: str) -> str:
    return f"/tasks/{task_id}"


def session_path(task_id: str, session_id: str) -> str:
    return f"/tasks/{task_id}/sessions/{session_id}"
