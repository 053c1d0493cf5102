"""Test-only routes (mounted when ``KANDEV_TEST_API=1``): fault points and the agent's record.

``agentctl.prompt`` is the agent's fault point: forwarded to the agentctl mock, or applied by the
ACP executor at its dispatch boundary, so QA suites drive every fault through one API.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import Field

from backend import failpoints
from backend.api.deps import RuntimeDep
from backend.api.schemas import Body
from backend.errors import DomainError

router = APIRouter(prefix="/api/v1/_test", include_in_schema=False)

AGENT_FAILPOINT = "agentctl.prompt"


class FailpointBody(Body):
    action: Literal["crash", "error", "delay", "hold", "reject", "timeout", "accept_then_fail"]
    ms: int = Field(default=0, ge=0, le=3_600_000)
    count: int | None = Field(default=None, ge=1)


class NoAgentctl(DomainError):
    status = 409
    code = "no_agentctl"


def _agent(runtime: Any) -> Any:
    if runtime.agent_control is None:
        raise NoAgentctl("this backend's agent executor has no test controls")
    return runtime.agent_control


@router.put("/failpoints/{name}", status_code=204)
async def set_failpoint(name: str, body: FailpointBody, runtime: RuntimeDep) -> Response:
    agent_actions = ("reject", "timeout", "accept_then_fail")
    if (name == AGENT_FAILPOINT) != (body.action in agent_actions):
        raise DomainError(f"action {body.action!r} does not apply to {name!r}")
    if name == AGENT_FAILPOINT:
        await _agent(runtime).set_failpoint(body.action, body.count)
    else:
        failpoints.configure(name, body.action, ms=body.ms, count=body.count)
    return Response(status_code=204)


@router.delete("/failpoints/{name}", status_code=204)
async def clear_failpoint(name: str, runtime: RuntimeDep) -> Response:
    if name == AGENT_FAILPOINT:
        await _agent(runtime).clear_failpoint()
    else:
        failpoints.clear(name)
    return Response(status_code=204)


@router.get("/failpoints")
async def list_failpoints(runtime: RuntimeDep) -> Any:
    return {"failpoints": failpoints.listing()}


@router.get("/agent/prompts")
async def agent_prompts(runtime: RuntimeDep) -> Any:
    return {"prompts": await _agent(runtime).prompts()}
