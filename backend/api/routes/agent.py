"""Callbacks from agent executors (see docs/agent-protocol.md); each needs the session's
agent credential."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from backend.api.deps import RuntimeDep, client_gone, require_agent
from backend.api.schemas import AgentClarificationBody, AgentMessageBody, AgentTurnCompleteBody
from backend.clarifications.store import Question

router = APIRouter(
    prefix="/api/v1/_agent", include_in_schema=False, dependencies=[Depends(require_agent)]
)


@router.post("/sessions/{session_id}/messages", status_code=201)
async def agent_message(session_id: str, body: AgentMessageBody, runtime: RuntimeDep) -> Any:
    row = await runtime.orchestrator.agent_message(
        session_id, body.turn_id, body.prompt_generation, body.content
    )
    return {"message_id": row["id"]}


@router.post("/sessions/{session_id}/clarifications")
async def agent_clarification(
    session_id: str, body: AgentClarificationBody, request: Request, runtime: RuntimeDep
) -> Any:
    """The live waiter: held open until an answer, a Skip, the wait's end or a disconnect."""
    result = await runtime.orchestrator.agent_clarification(
        session_id,
        body.turn_id,
        body.prompt_generation,
        [Question(q.question, tuple(q.options), q.multi_select) for q in body.questions],
        body.wait_seconds,
        client_gone(request),
    )
    return {"outcome": result.outcome, "pending_id": result.pending_id, "answers": result.answers}


@router.post("/sessions/{session_id}/turns/{turn_id}/complete")
async def turn_complete(
    session_id: str, turn_id: str, body: AgentTurnCompleteBody, runtime: RuntimeDep
) -> Any:
    applied = await runtime.orchestrator.turn_complete(
        session_id, turn_id, body.prompt_generation, body.status
    )
    return {"applied": applied}
