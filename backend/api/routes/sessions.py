"""Task sessions, their turns, messages and active clarifications over HTTP: thin adapters
over :mod:`backend.services.sessions`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from backend.api.deps import CallerDep, RuntimeDep
from backend.api.schemas import CreateSessionBody, PromptBody, SessionStateBody
from backend.services.sessions import (
    agent_profiles,
    delete_session_message,
    prompt_session,
    session_clarifications,
    session_messages,
    session_turns,
    set_session_state,
    start_task_session,
    task_session_list,
)
from backend.vocabulary import SessionState

router = APIRouter(prefix="/api/v1")


@router.get("/agent-profiles")
async def list_agent_profiles(runtime: RuntimeDep, caller: CallerDep) -> Any:
    """The agents a session can run (``agent_profile`` of a new session)."""
    return agent_profiles(runtime)


@router.post("/tasks/{task_id}/task-sessions", status_code=201)
async def create_session(
    task_id: str, body: CreateSessionBody, runtime: RuntimeDep, caller: CallerDep
) -> Any:
    return await start_task_session(
        runtime,
        caller,
        task_id,
        body.prompt,
        is_primary=body.is_primary,
        agent_profile=body.agent_profile,
    )


@router.get("/tasks/{task_id}/task-sessions")
async def list_sessions(task_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    return {"sessions": await task_session_list(runtime, caller, task_id)}


@router.post("/task-sessions/{session_id}/prompt", status_code=202)
async def prompt(session_id: str, body: PromptBody, runtime: RuntimeDep, caller: CallerDep) -> Any:
    return {"turn_id": await prompt_session(runtime, caller, session_id, body.content)}


@router.post("/task-sessions/{session_id}/state")
async def set_state(
    session_id: str, body: SessionStateBody, runtime: RuntimeDep, caller: CallerDep
) -> Any:
    return await set_session_state(runtime, caller, session_id, SessionState(body.state))


@router.get("/task-sessions/{session_id}/turns")
async def list_turns(session_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    return {"turns": await session_turns(runtime, caller, session_id)}


@router.get("/task-sessions/{session_id}/messages")
async def list_messages(session_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    return {"messages": await session_messages(runtime, caller, session_id)}


@router.delete("/task-sessions/{session_id}/messages/{message_id}", status_code=204)
async def delete_message(
    session_id: str, message_id: str, runtime: RuntimeDep, caller: CallerDep
) -> Response:
    await delete_session_message(runtime, caller, session_id, message_id)
    return Response(status_code=204)


@router.get("/task-sessions/{session_id}/clarifications")
async def list_clarifications(session_id: str, runtime: RuntimeDep, caller: CallerDep) -> Any:
    """Only the bundles the rule calls active, with their still-pending questions."""
    return {"bundles": await session_clarifications(runtime, caller, session_id)}
