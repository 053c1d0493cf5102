"""Agents' permission requests (ACP ``session/request_permission``), answerable by the user.

``requests.py`` (the options and the row's shape), ``store.py`` (the compare-and-set
writes), ``live.py`` (the agent's side: the live waiter), ``respond.py`` (the user's side: the
exactly-once claim), ``announce.py`` (events and summaries), ``desk.py`` (the runtime's one
object: the agent's side plus ``respond``). See docs/architecture.md and docs/reliability.md
(*Permission requests*).
"""

from backend.permissions.desk import PermissionDesk
from backend.permissions.requests import PermissionOption

__all__ = ["PermissionDesk", "PermissionOption"]
