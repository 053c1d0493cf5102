"""Who is calling, and which tasks they may see.

Callers identify with a bearer token; only its SHA-256 is stored (``users.token_hash``). Users
see the tasks of the workspaces they belong to. In single-user mode (the default for ``run``)
a request without a token acts as the local user, who is a member of every workspace.

Everything that touches a task, its sessions, turns, messages or clarifications resolves the
target through :func:`visible_task` and friends *before* doing any work, and answers 404 for
an invisible target exactly as for a missing one, so a stranger learns nothing and writes
nothing. Selecting a session never widens what a caller can see: a session is visible only
through its task.

Every request resolves its caller and most resolve a target, so those statements are built
once with bound parameters.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, bindparam, false, select, true
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.tables import memberships, messages, sessions, tasks, users, workflows
from backend.errors import DomainError, NotFound
from backend.request_evidence import pending_id

LOCAL_USER_ID = "local"
#: The demo data's local user (see ``backend.seed``): the identity of token-less requests.
LOCAL_USER_EMAIL = "local@kandev.invalid"


class Unauthorized(DomainError):
    status = 401
    code = "unauthorized"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True, slots=True)
class Caller:
    user_id: str
    name: str
    #: ``None`` means every workspace (the single-user local caller).
    workspace_ids: frozenset[str] | None

    def sees_workspace(self, workspace_id: str) -> bool:
        return self.workspace_ids is None or workspace_id in self.workspace_ids

    def workspace_filter(self, column: ColumnElement[str]) -> ColumnElement[bool]:
        """A WHERE clause restricting ``column`` (a workspace id) to what the caller sees."""
        if self.workspace_ids is None:
            return true()
        if not self.workspace_ids:
            return false()
        return column.in_(sorted(self.workspace_ids))

    def task_filter(self) -> ColumnElement[bool]:
        return self.workspace_filter(tasks.c.workspace_id)


_LOCAL_USER = select(users.c.id, users.c.name).where(users.c.email == LOCAL_USER_EMAIL)
_USER_OF_TOKEN = select(users.c.id, users.c.name, users.c.email).where(
    users.c.token_hash == bindparam("token_hash")
)
_WORKSPACES_OF_USER = select(memberships.c.workspace_id).where(
    memberships.c.user_id == bindparam("user_id")
)


async def resolve_caller(conn: AsyncConnection, token: str | None, single_user: bool) -> Caller:
    """The caller behind ``token``; 401 for an unknown token, or for none outside single-user
    mode."""
    if token is None:
        if not single_user:
            raise Unauthorized("a bearer token is required")
        local = (await conn.execute(_LOCAL_USER)).first()
        if local is None:
            return Caller(LOCAL_USER_ID, "Local user", None)
        return Caller(local.id, local.name, None)
    user = (await conn.execute(_USER_OF_TOKEN, {"token_hash": hash_token(token)})).first()
    if user is None:
        raise Unauthorized("unknown bearer token")
    if single_user and user.email == LOCAL_USER_EMAIL:
        return Caller(user.id, user.name, None)
    ids = await conn.execute(_WORKSPACES_OF_USER, {"user_id": user.id})
    return Caller(user.id, user.name, frozenset(r.workspace_id for r in ids))


def bearer_token(authorization: str | None, query_token: str | None = None) -> str | None:
    """The token from ``Authorization: Bearer ...`` (or, for WebSockets, ``?token=``)."""
    token = None
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise Unauthorized("use 'Authorization: Bearer <token>'")
        token = value.strip()
    elif query_token:
        token = query_token
    if token is not None and "\x00" in token:
        raise Unauthorized("unknown bearer token")
    return token


async def _visible(
    conn: AsyncConnection, caller: Caller, stmt: Any, target_id: str, what: str
) -> Any:
    """The first row of ``stmt`` for ``target_id`` (it selects a ``workspace_id``), or 404
    when there is none or its workspace is not the caller's: both look the same from outside."""
    row = (await conn.execute(stmt, {"target": target_id})).first()
    if row is None or not caller.sees_workspace(row.workspace_id):
        raise NotFound(f"no such {what}")
    return row


#: Each target's task and workspace, by the id bound as ``target``.
_TASK = select(tasks.c.workspace_id).where(tasks.c.id == bindparam("target"))
_SESSION = (
    select(tasks.c.id, tasks.c.workspace_id)
    .join(sessions, sessions.c.task_id == tasks.c.id)
    .where(sessions.c.id == bindparam("target"))
)
_BUNDLE = (
    select(tasks.c.workspace_id)
    .join(sessions, sessions.c.task_id == tasks.c.id)
    .join(messages, messages.c.session_id == sessions.c.id)
    .where(pending_id(messages) == bindparam("target"))
    .limit(1)
)
_WORKFLOW = select(workflows.c.workspace_id).where(workflows.c.id == bindparam("target"))


async def visible_task(conn: AsyncConnection, caller: Caller, task_id: str) -> str:
    """The task's workspace id, or 404 when it is missing or not the caller's to see."""
    return str((await _visible(conn, caller, _TASK, task_id, "task")).workspace_id)


async def visible_session(conn: AsyncConnection, caller: Caller, session_id: str) -> str:
    """The session's task id, or 404 (a session is visible only through its task)."""
    return str((await _visible(conn, caller, _SESSION, session_id, "session")).id)


async def visible_bundle(conn: AsyncConnection, caller: Caller, bundle_id: str) -> None:
    """404 unless the clarification bundle exists in a task the caller can see."""
    await _visible(conn, caller, _BUNDLE, bundle_id, "clarification")


async def visible_workflow(conn: AsyncConnection, caller: Caller, workflow_id: str) -> None:
    await _visible(conn, caller, _WORKFLOW, workflow_id, "workflow")
