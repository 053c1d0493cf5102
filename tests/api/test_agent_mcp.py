"""The clarification tool over MCP (``backend/agent_tools.py``), driven with the official MCP
client the way an ACP agent would: the call is the live waiter, a wait that ends detaches
the bundle (still answerable, delivered as the next prompt), and the endpoint needs the
session's agent credential."""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest

from backend.agent_tools import DETACHED_HINT, MCP_PATH
from tests.support.http import (
    answer_all,
    bundles,
    detach_events,
    idle,
    respond,
    start_session,
    turns,
)
from tests.support.live import LiveApi
from tests.support.mcp_agent import ask, mcp_session
from tests.support.processes import eventually

#: A turn that stays open while the test plays the agent's MCP side.
BUSY = "/sleep 120000"


async def _open_session(live: LiveApi) -> tuple[str, str, str]:
    task, session = await start_session(live, BUSY)
    await eventually(lambda: turns(live, session), lambda t: len(t) == 1)
    return task, session, live.runtime.credentials.token_for(session)


async def test_the_tool_call_waits_for_the_users_answer(live):
    _task, session, credential = await _open_session(live)
    async with mcp_session(live.url, credential) as mcp:
        asking = asyncio.create_task(
            ask(mcp, ("Which database?", ["SQLite", "PostgreSQL"]), wait=60)
        )
        (bundle,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
        assert bundle["state"] == "active_live"
        status, body = await respond(live, bundle["pending_id"], answer_all(bundle, option=1))
        assert (status, body["outcome"]) == (200, "delivered")
        result = await asking
    assert not result.is_error
    answer = result.structured_content
    assert answer["outcome"] == "answered"
    assert answer["answers"][0]["option_labels"] == ["PostgreSQL"]
    assert await bundles(live, session) == []


@pytest.mark.scenario("S01")
async def test_a_wait_that_ends_detaches_and_the_answer_comes_as_a_prompt(live):
    task, session, credential = await _open_session(live)
    async with mcp_session(live.url, credential) as mcp:
        result = await ask(mcp, ("Deploy now?", ["yes", "no"]), wait=0)
    assert result.structured_content["outcome"] == "detached"
    assert result.structured_content["message"] == DETACHED_HINT
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (bundle,) = await bundles(live, session)
    assert bundle["state"] == "active_detached"
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    (resume,) = [p for p in await live.dispatched(session) if p["content"] != BUSY]
    assert resume["turn_id"] != (await turns(live, session))[0]["id"]


@pytest.mark.scenario("S01")
async def test_a_cancelled_tool_call_leaves_the_question_answerable(live):
    task, session, credential = await _open_session(live)
    async with mcp_session(live.url, credential) as mcp:
        asking = asyncio.create_task(ask(mcp, ("Keep me?", ["yes"]), wait=600))
        await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
    (bundle,) = await eventually(
        lambda: bundles(live, session), lambda b: b and b[0]["state"] == "active_detached"
    )
    assert bundle["questions"][0]["question"] == "Keep me?"
    # The whole exit ran although the cancelled request's every await was cancelled: the
    # detach was announced once and the asking turn paused (the user's answer resumes it).
    (event,) = await eventually(lambda: detach_events(live, session))
    assert event["metadata"]["pending_id"] == bundle["pending_id"]
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (turn,) = await turns(live, session)
    assert turn["completed_at"] is not None


async def test_a_session_without_an_open_turn_gets_a_tool_error(live):
    task, session = await start_session(live, "/reply done")
    await idle(live, task, session)
    credential = live.runtime.credentials.token_for(session)
    async with mcp_session(live.url, credential) as mcp:
        result = await ask(mcp, ("Too late?", []), wait=0)
    assert result.is_error
    assert await bundles(live, session) == []


@pytest.mark.parametrize("authorization", [None, "Bearer guessed.credential", "Basic x"])
async def test_the_endpoint_needs_a_sessions_credential(live, authorization):
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(base_url=live.url) as http:
        response = await http.post(f"{MCP_PATH}/", json=body, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


@pytest.mark.scenario("S01")
async def test_stopping_the_tool_server_mid_call_leaves_the_question_answerable(live):
    """Shutdown is an exit too: the held tool calls end and their bundles detach."""
    _task, session, credential = await _open_session(live)
    async with mcp_session(live.url, credential) as mcp:
        asking = asyncio.create_task(ask(mcp, ("Still there?", ["yes"]), wait=600))
        await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
        await live.runtime.agent_tools.stop()
        (bundle,) = await eventually(
            lambda: bundles(live, session), lambda b: b and b[0]["state"] == "active_detached"
        )
        asking.cancel()
        with contextlib.suppress(BaseException):
            await asking
    assert bundle["questions"][0]["question"] == "Still there?"
