"""Task-session use cases: listing, starting and prompting sessions, ending them, and reading
(or deleting from) their turns, transcript and active clarifications.

Session views carry their authoritative ``pending_action`` stamped with the revision of the
projection that read it (:func:`backend.projections.sessions.project_sessions`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from backend import failpoints
from backend.access import Caller, visible_session, visible_task
from backend.authority import Scope, Where, visible_turns
from backend.authority.bundles import AnyWaiters
from backend.clarifications.views import active_bundle_views
from backend.db.engine import read_tx, write_tx
from backend.db.tables import messages
from backend.errors import NotFound, UnknownAgentProfile
from backend.projections.revision import ProjectionRevision
from backend.projections.sessions import project_sessions
from backend.runtime import Runtime
from backend.views import message_view, session_view, turn_view
from backend.vocabulary import SessionState


async def _session_views(
    runtime: Runtime, where: Where, revision: ProjectionRevision | None = None
) -> list[dict[str, Any]]:
    """Sessions with their authoritative ``pending_action``, stamped with their projection's
    revision (see :func:`backend.projections.sessions.project_sessions`)."""
    projection = await project_sessions(
        runtime.engine, runtime.revisions, where, revision=revision, with_rows=True
    )
    stamp = projection.revision.to_json()
    actions = projection.pending_actions()
    views = []
    for row in projection.rows:
        action = actions.get(row.id)
        views.append(session_view(row._mapping, action.value if action else None, stamp))
    return views


async def task_session_list(runtime: Runtime, caller: Caller, task_id: str) -> list[dict[str, Any]]:
    """A task's sessions for navigation, REST and WebSocket alike. Any failure of the
    authoritative projection propagates (500): never a clean-looking list with unknown
    pending ownership (S44)."""
    async with read_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
    revision = await runtime.revisions.reserve()
    await failpoints.hit("sessions.list")  # between the reservation and the read it labels
    views = await _session_views(runtime, Scope.task(task_id), revision)
    # Between the read and the response: what was read is already history when it arrives.
    await failpoints.hit("sessions.list.after_read")
    return views


async def _one_session(runtime: Runtime, session_id: str) -> dict[str, Any]:
    views = await _session_views(runtime, Scope.session(session_id))
    if not views:
        raise NotFound("no such session")
    return views[0]


async def _require_session(runtime: Runtime, caller: Caller, session_id: str) -> None:
    """404 unless the session exists in a task the caller can see (before any work)."""
    async with read_tx(runtime.engine) as conn:
        await visible_session(conn, caller, session_id)


def agent_profiles(runtime: Runtime) -> dict[str, Any]:
    """The agent profiles a new session may name, and the one it gets when it names none."""
    return {
        "profiles": [{"name": name} for name in sorted(runtime.profiles)],
        "default": runtime.settings.agent,
    }


async def start_task_session(
    runtime: Runtime,
    caller: Caller,
    task_id: str,
    prompt: str,
    *,
    is_primary: bool | None = None,
    agent_profile: str | None = None,
) -> dict[str, Any]:
    """Create a session of a visible task and start its first turn with the named agent
    profile (the server's default when ``None``)."""
    agent_profile = agent_profile or runtime.settings.agent
    if agent_profile not in runtime.profiles:
        known = ", ".join(sorted(runtime.profiles))
        raise UnknownAgentProfile(f"no agent profile {agent_profile!r} (known: {known})")
    async with read_tx(runtime.engine) as conn:
        await visible_task(conn, caller, task_id)
    row, _ = await runtime.orchestrator.create_session(
        task_id, prompt, is_primary=is_primary, agent_profile=agent_profile
    )
    return await _one_session(runtime, row["id"])


async def prompt_session(runtime: Runtime, caller: Caller, session_id: str, content: str) -> str:
    """Start a newer turn of a visible session; returns its turn id."""
    await _require_session(runtime, caller, session_id)
    return await runtime.orchestrator.prompt(session_id, content)


async def set_session_state(
    runtime: Runtime, caller: Caller, session_id: str, state: SessionState
) -> dict[str, Any]:
    """End a visible session in ``state`` (the orchestrator's terminal transition); returns
    the session's view afterwards."""
    await _require_session(runtime, caller, session_id)
    await runtime.orchestrator.set_state(session_id, state)
    return await _one_session(runtime, session_id)


async def session_turns(runtime: Runtime, caller: Caller, session_id: str) -> list[dict[str, Any]]:
    """A visible session's turn history (unpublished reservations stay hidden, S27)."""
    await _require_session(runtime, caller, session_id)
    async with read_tx(runtime.engine) as conn:
        return [turn_view(t) for t in await visible_turns(conn, session_id)]


async def session_messages(
    runtime: Runtime, caller: Caller, session_id: str
) -> list[dict[str, Any]]:
    """A visible session's transcript in order."""
    await _require_session(runtime, caller, session_id)
    async with read_tx(runtime.engine) as conn:
        rows = await conn.execute(
            select(messages)
            .where(messages.c.session_id == session_id)
            .order_by(messages.c.created_at, messages.c.id)
        )
        return [message_view(r._mapping) for r in rows]


async def delete_session_message(
    runtime: Runtime, caller: Caller, session_id: str, message_id: str
) -> None:
    """Delete one message of a visible session (404 when it is not that session's), then
    announce ``session.message.deleted``."""
    await _require_session(runtime, caller, session_id)
    async with write_tx(runtime.engine) as conn:
        deleted = (
            await conn.execute(
                delete(messages)
                .where(messages.c.id == message_id, messages.c.session_id == session_id)
                .returning(*messages.c)
            )
        ).first()
    if deleted is None:
        raise NotFound("no such message")
    await runtime.events.message("session.message.deleted", dict(deleted._mapping))


async def session_clarifications(
    runtime: Runtime, caller: Caller, session_id: str, *, clarifications_only: bool = False
) -> list[dict[str, Any]]:
    """A visible session's active bundles (clarifications and permission requests), by the
    one repository rule; ``active_live`` while this process holds the agent's waiter."""
    await _require_session(runtime, caller, session_id)
    await failpoints.hit("clarifications.list")  # e.g. the UI's pending discovery waits here
    waiters = AnyWaiters(runtime.waiters, runtime.permissions.waiters)
    return await active_bundle_views(
        runtime.engine, waiters, session_id, clarifications_only=clarifications_only
    )
