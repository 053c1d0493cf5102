"""The UI's calls into the backend running in this process.

Every function here calls the service layer (:mod:`backend.services`) the HTTP routes call
(visibility checks, summary repair, the responder, the workflow guard), so the UI and the REST
API cannot drift apart and nothing is written twice. Bodies are validated with the routes' own
request models, so the UI refuses exactly what the API refuses. All calls are async: no
blocking database access runs on Reflex's event loop.

The UI acts as the single-user local caller (the person at this machine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from backend.access import Caller, resolve_caller
from backend.api.permission_schemas import PermissionRespondBody
from backend.api.schemas import CreateSessionBody, CreateTaskBody, PromptBody, RespondBody
from backend.db.engine import read_tx
from backend.errors import DeliveryFailed, DomainError, NotActive, NotFound
from backend.services.boot import boot_payload
from backend.services.clarifications import respond_to_bundle
from backend.services.permissions import respond_to_permission
from backend.services.sessions import (
    agent_profiles,
    prompt_session,
    session_clarifications,
    session_messages,
    start_task_session,
    task_session_list,
)
from backend.services.tasks import add_task, move_visible_task, visible_tasks_by_id
from state.backend_ref import get_runtime

_caller: Caller | None = None


class SignInRequired(DomainError):
    """The UI has no sign-in yet: outside single-user mode it must not act as anybody."""

    status = 401
    code = "unauthorized"


async def caller() -> Caller:
    """The local single-user caller; resolved once (the local user never changes).

    With ``KANDEV_SINGLE_USER=false`` the API demands bearer tokens; the UI cannot present
    one, so it refuses instead of silently acting as the local user (which would bypass the
    access rules the API enforces).
    """
    global _caller
    runtime = get_runtime()
    if not runtime.settings.single_user:
        raise SignInRequired("This UI runs in single-user mode only (KANDEV_SINGLE_USER=true).")
    if _caller is None:
        async with read_tx(runtime.engine) as conn:
            _caller = await resolve_caller(conn, None, single_user=True)
    return _caller


# -- errors as the UI reports them -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UiError:
    """A backend refusal in words a person can act on."""

    code: str
    message: str
    status: int = 500
    retryable: bool = False


def describe(error: BaseException) -> UiError:
    """Map backend and validation errors to what the UI shows."""
    if isinstance(error, ValidationError):
        first = error.errors()[0] if error.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        text = first.get("msg", "invalid input")
        return UiError("validation", f"{where}: {text}" if where else text, 400)
    if isinstance(error, NotActive):
        return UiError("not_active", "That question is no longer active, so nothing was sent.", 409)
    if isinstance(error, DeliveryFailed):
        retryable = bool(error.extra.get("retryable"))
        if retryable:
            text = "The answer could not be delivered. It is still pending: try again."
        else:
            text = "Delivery failed after the agent may have received the answer; not resent."
        return UiError(error.code, text, error.status, retryable)
    if isinstance(error, DomainError):
        return UiError(error.code, error.message, error.status)
    return UiError("internal", "Something went wrong. Please try again.", 500)


# -- reads -----------------------------------------------------------------------------------


async def boot() -> dict[str, Any]:
    """The boot payload (epoch, workspaces, workflows, tasks with repaired summaries)."""
    return await boot_payload(get_runtime(), await caller())


async def tasks_by_id(task_ids: Collection[str]) -> dict[str, dict[str, Any]]:
    """The visible tasks among ``task_ids`` with repaired summaries; missing ones are absent."""
    if not task_ids:
        return {}
    return await visible_tasks_by_id(get_runtime(), await caller(), task_ids)


async def sessions(task_id: str) -> dict[str, Any]:
    """``{"sessions": [...]}``: authoritative, revisioned, never from a cache (the forced
    load of a pending task). Raises on a failed projection rather than guess (S44)."""
    rows = await task_session_list(get_runtime(), await caller(), task_id)
    return {"sessions": rows}


@dataclass(frozen=True, slots=True)
class ActivationLoad:
    """What a task activation read: the task's sessions (or the error that load raised) and,
    read after them, the task itself (``None`` when it is gone or invisible)."""

    sessions: dict[str, Any] | BaseException
    task: dict[str, Any] | None


async def activation_load(task_id: str) -> ActivationLoad:
    """The forced session load, then the task's repaired summary, so activation can revalidate
    the summary revision and pending action the user clicked against the server's (S11)."""
    result: dict[str, Any] | BaseException
    try:
        result = await sessions(task_id)
    except asyncio.CancelledError:
        raise
    except Exception as error:
        result = error
    found = await tasks_by_id([task_id])
    return ActivationLoad(result, found.get(task_id))


async def session_view(session_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A session's transcript and its active bundles, read concurrently."""
    runtime, who = get_runtime(), await caller()
    messages, bundles = await asyncio.gather(
        session_messages(runtime, who, session_id),
        session_clarifications(runtime, who, session_id),
    )
    return messages, bundles


async def bundles(session_id: str) -> list[dict[str, Any]]:
    """The session's active bundles: clarifications and permission requests (``kind``), what
    the overlay can answer."""
    return await session_clarifications(get_runtime(), await caller(), session_id)


async def messages(session_id: str) -> list[dict[str, Any]]:
    return await session_messages(get_runtime(), await caller(), session_id)


# -- writes ----------------------------------------------------------------------------------


async def respond(
    pending_id: str, answers: list[dict[str, Any]] | None, rejected: bool, reason: str | None = None
) -> str:
    """Answer (``answers``) or Skip (``rejected=True``) a bundle; returns the outcome."""
    body = RespondBody.model_validate(
        {"answers": answers, "rejected": rejected, "reason": reason}, strict=False
    )
    return await respond_to_bundle(
        get_runtime(), await caller(), pending_id, body.parsed_answers(), body.rejected, body.reason
    )


async def respond_permission(pending_id: str, option_id: str) -> str:
    """Pick ``option_id`` on an agent's permission request; returns the outcome."""
    body = PermissionRespondBody.model_validate({"option_id": option_id})
    return await respond_to_permission(get_runtime(), await caller(), pending_id, body.option_id)


async def prompt(session_id: str, content: str) -> str:
    body = PromptBody.model_validate({"content": content})
    return await prompt_session(get_runtime(), await caller(), session_id, body.content)


def agent_choices() -> tuple[list[str], str]:
    """The agent profiles a new session may run, and the default one."""
    listing = agent_profiles(get_runtime())
    return [p["name"] for p in listing["profiles"]], listing["default"]


async def start_session(
    task_id: str, prompt_text: str, agent_profile: str | None = None
) -> dict[str, Any]:
    body = CreateSessionBody.model_validate({"prompt": prompt_text, "agent_profile": agent_profile})
    return await start_task_session(
        get_runtime(), await caller(), task_id, body.prompt, agent_profile=body.agent_profile
    )


async def new_task(title: str, description: str, workspace_id: str | None) -> dict[str, Any]:
    body = CreateTaskBody.model_validate(
        {"title": title, "description": description, "workspace_id": workspace_id or None}
    )
    return await add_task(
        get_runtime(),
        await caller(),
        title=body.title,
        description=body.description,
        workspace_id=body.workspace_id,
    )


async def move_task(task_id: str, step_id: str) -> dict[str, Any]:
    return await move_visible_task(get_runtime(), await caller(), task_id, step_id)


__all__ = [
    "ActivationLoad",
    "NotFound",
    "UiError",
    "activation_load",
    "boot",
    "bundles",
    "caller",
    "describe",
    "messages",
    "move_task",
    "new_task",
    "prompt",
    "respond",
    "respond_permission",
    "session_view",
    "sessions",
    "start_session",
    "tasks_by_id",
]
