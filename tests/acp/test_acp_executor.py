"""The ACP executor (``backend/agents/acp_executor.py``) with the project's ACP mock agent
(``backend/agents/mock_acp.py``): real agent processes over stdio, questions asked through
Kandev's MCP tool, on both databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from backend.agents.acp_executor import AcpExecutor
from backend.agents.profiles import BUILT_IN, MOCK, MOCK_RECORD_ENV
from backend.config import Settings
from backend.db.engine import read_tx
from backend.db.tables import sessions
from backend.orchestrator.dispatch import PromptRequest
from backend.runtime import Runtime
from tests.acp.conftest import mock_profiles
from tests.support.builders import World
from tests.support.http import (
    agent_replies,
    answer_all,
    bundles,
    idle,
    respond,
    session_of,
    start_session,
    turns,
)
from tests.support.live import LiveApi, live_api
from tests.support.processes import eventually


async def test_replies_become_messages_and_the_stop_reason_completes_the_turn(acp):
    live = acp.api
    task, session = await start_session(live, "/reply first\n/reply second")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["first", "second"]
    (turn,) = await turns(live, session)
    assert turn["completed_at"] is not None
    (prompt,) = acp.prompts(session)
    assert prompt["turn_id"] == turn["id"]


@pytest.mark.scenario("S01")
async def test_a_question_over_mcp_is_answered_live(acp):
    live = acp.api
    task, session = await start_session(
        live, "/reply Looking at the schema.\n/ask Which DB? | SQLite | PostgreSQL"
    )
    (bundle,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    # What the agent said before asking is on screen while it waits.
    assert await agent_replies(live, session) == ["Looking at the schema."]
    assert bundle["state"] == "active_live"
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle, option=1))
    assert (status, body["outcome"]) == (200, "delivered")
    await idle(live, task, session)
    replies = await agent_replies(live, session)
    assert replies == ["Looking at the schema.", "Got: Which DB?: PostgreSQL"]


@pytest.mark.scenario("S01")
async def test_a_detached_question_resumes_the_agent_with_the_answer(acp):
    live = acp.api
    task, session = await start_session(live, "/ask Deploy? | yes | no\n/disconnect")
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (bundle,) = await bundles(live, session)
    assert bundle["state"] == "active_detached"
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Deploy?: yes"]
    assert len(acp.prompts(session)) == 2  # the first prompt, then the resume


async def test_a_refusal_fails_the_turn(acp):
    live = acp.api
    task, session = await start_session(live, "/fail")
    await eventually(lambda: turns(live, session), lambda t: t[0]["completed_at"] is not None)
    state = (await session_of(live, task, session))["state"]
    assert state in ("IDLE", "FAILED")  # what a failed turn leaves


async def test_a_crashed_agent_fails_its_turn_and_the_next_prompt_starts_a_new_one(acp):
    live = acp.api
    task, session = await start_session(live, "/sleep 60000")
    await eventually(lambda: acp.prompts(session), lambda p: len(p) == 1)
    crashed = acp.executor._agents[session].process
    crashed.kill()
    await idle(live, task, session)
    (reply,) = await agent_replies(live, session)
    assert reply.startswith("The agent process exited with code")
    response = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "/reply back"}
    )
    assert response.status_code == 202
    await eventually(lambda: agent_replies(live, session), lambda r: r[-1:] == ["back"])
    assert acp.executor._agents[session].process is not crashed


async def test_an_agent_that_cannot_start_refuses_the_prompt(engine, tmp_path: Path):
    executor = AcpExecutor(mock_profiles(tmp_path / "r", ("/nonexistent/agent",)))
    async with live_api(engine, tmp_path / "r", dispatcher=executor) as live:
        task = await World(live.runtime.engine).task()
        response = await live.http.post(
            f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "hi"}
        )
        await executor.aclose()
    assert response.status_code == 502, response.text


async def test_the_runtime_runs_each_session_with_its_profile(engine, tmp_path: Path):
    runtime = Runtime(engine, Settings(mock_record=str(tmp_path / "r")))
    executor = runtime.orchestrator.dispatcher
    assert isinstance(executor, AcpExecutor)
    assert executor.profiles[MOCK].command == BUILT_IN[MOCK].command
    assert executor.profiles[MOCK].env == {MOCK_RECORD_ENV: str(tmp_path / "r")}
    assert {"claude-code", "codex"} <= set(executor.profiles)
    with pytest.raises(ValueError, match="unknown agent profile 'nobody'"):
        Runtime(engine, Settings(agent="nobody"))


async def test_a_session_names_its_agent_profile(live_with_two_agents):
    live, records = live_with_two_agents
    listing = (await live.http.get("/api/v1/agent-profiles")).json()
    assert listing == {
        "profiles": [{"name": n} for n in ("claude-code", "codex", "mock", "second")],
        "default": "mock",
    }
    task = await World(live.runtime.engine).task()
    started = {}
    for profile in ("mock", "second"):
        created = await live.http.post(
            f"/api/v1/tasks/{task}/task-sessions",
            json={"prompt": f"/reply from {profile}", "agent_profile": profile},
        )
        assert created.status_code == 201, created.text
        started[profile] = created.json()["id"]
    for profile, session in started.items():
        await eventually(
            lambda s=session: agent_replies(live, s), lambda r, p=profile: r == [f"from {p}"]
        )
    # Each prompt went to the agent process of its own profile.
    for profile, record in records.items():
        lines = [json.loads(line) for line in record.read_text().splitlines()]
        assert [p["session_id"] for p in lines] == [started[profile]]


@pytest.mark.parametrize("profile", ["nobody", "a b", "", 7])
async def test_an_unknown_agent_profile_is_refused_and_nothing_is_written(
    live_with_two_agents, profile
):
    live, _ = live_with_two_agents
    task = await World(live.runtime.engine).task()
    response = await live.http.post(
        f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "hi", "agent_profile": profile}
    )
    assert response.status_code == 400, response.text
    assert "Traceback" not in response.text
    listed = await live.http.get(f"/api/v1/tasks/{task}/task-sessions")
    assert listed.json()["sessions"] == []


@pytest.fixture
async def live_with_two_agents(engine, tmp_path: Path):
    """The API with a second profile (the mock again, recording elsewhere) from a profiles
    file, as a user adds an agent."""
    records = {"mock": tmp_path / "mock.jsonl", "second": tmp_path / "second.jsonl"}
    extra = tmp_path / "agents.json"
    extra.write_text(
        json.dumps(
            {
                "second": {
                    "command": list(BUILT_IN[MOCK].command),
                    "env": {MOCK_RECORD_ENV: str(records["second"])},
                }
            }
        )
    )
    async with live_api(engine, records["mock"], profiles_file=str(extra)) as live:
        yield live, records


async def _fault(live: LiveApi, action: str) -> None:
    """Arm the agent fault through the test API, as QA suites do."""
    response = await live.http.put(
        "/api/v1/_test/failpoints/agentctl.prompt", json={"action": action, "count": 1}
    )
    assert response.status_code == 204, response.text


async def _recorded(live: LiveApi, session: str) -> list[dict]:
    prompts = (await live.http.get("/api/v1/_test/agent/prompts")).json()["prompts"]
    return [p for p in prompts if p["session_id"] == session]


async def _detached(live: LiveApi, question: str) -> tuple[str, str, dict]:
    task, session = await start_session(live, f"/ask {question} | yes\n/disconnect")
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    await eventually(lambda: turns(live, session), lambda t: t[-1]["completed_at"] is not None)
    (bundle,) = await bundles(live, session)
    return task, session, bundle


@pytest.mark.parametrize("action", ["reject", "timeout"])
async def test_a_resume_the_agent_did_not_take_keeps_the_question_answerable(acp, action):
    live = acp.api
    task, session, bundle = await _detached(live, "Retry me?")
    await _fault(live, action)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, True)
    (again,) = await bundles(live, session)
    assert again["pending_id"] == bundle["pending_id"]
    assert len(await _recorded(live, session)) == 1  # only the first prompt reached the agent

    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Retry me?: yes"]
    assert len(await _recorded(live, session)) == 2


@pytest.mark.scenario("S18")
async def test_a_resume_accepted_then_failed_is_terminal_and_runs_once(acp):
    live = acp.api
    _task, session, bundle = await _detached(live, "Ambiguous?")
    await _fault(live, "accept_then_fail")
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, False)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["state"]) == (409, "terminal")
    # The agent did take it: it runs once and answers, and nothing re-sends it.
    await eventually(lambda: agent_replies(live, session), lambda r: r == ["Got: Ambiguous?: yes"])
    assert len(await _recorded(live, session)) == 2


async def test_a_slow_starting_agent_refuses_the_first_prompt_and_takes_the_retry(
    engine, tmp_path: Path
):
    """A launch slower than the acknowledgement deadline (a first ``npx`` download) goes on in
    the background: the prompt is refused (not taken), a retry finds the agent ready."""
    record = tmp_path / "record.jsonl"
    mock = " ".join(BUILT_IN[MOCK].command)
    slow = mock_profiles(record, ("sh", "-c", f"sleep 2; exec {mock}"))
    executor = AcpExecutor(slow, start_timeout_s=0.5)
    async with live_api(engine, record, dispatcher=executor) as live:
        try:
            task = await World(live.runtime.engine).task()
            first = await live.http.post(
                f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "/reply early"}
            )
            assert first.status_code == 502, first.text
            (session,) = (await live.http.get(f"/api/v1/tasks/{task}/task-sessions")).json()[
                "sessions"
            ]
            await eventually(lambda: executor._agents.get(session["id"]), within_s=20)
            retry = await live.http.post(
                f"/api/v1/task-sessions/{session['id']}/prompt", json={"content": "/reply ready"}
            )
            assert retry.status_code == 202, retry.text
            await eventually(lambda: agent_replies(live, session["id"]), lambda r: r == ["ready"])
        finally:
            await executor.aclose()


class _FailingSink:
    """The orchestrator's side, failing to store the agent's output (a database error)."""

    def __init__(self) -> None:
        self.completed: list[tuple[str, str]] = []

    async def agent_message(self, session_id: str, turn_id: str, generation: int, content: str):
        raise RuntimeError("database is locked")

    async def turn_complete(self, session_id: str, turn_id: str, generation: int, status: str):
        self.completed.append((turn_id, status))
        return True

    async def agent_session_opened(self, session_id: str, agent_session_id: str) -> None:
        raise RuntimeError("database is locked")


async def test_output_that_cannot_be_stored_still_completes_the_turn(tmp_path: Path):
    """An exit of a running prompt: storing a message fails unexpectedly; the turn must still
    be completed, or its session would stay busy with nothing to finish it."""
    executor = AcpExecutor(mock_profiles(tmp_path / "record.jsonl"), start_timeout_s=15.0)
    sink = _FailingSink()
    executor.attach(sink)
    request = PromptRequest("s-1", "t-1", 1, "/reply lost", "http://127.0.0.1:9", "s-1.x")
    try:
        await executor.dispatch_prompt(request)
        await eventually(lambda: sink.completed, within_s=20)
    finally:
        await executor.aclose()
    assert sink.completed == [("t-1", "completed")]


async def test_a_restarted_backend_resumes_the_agents_conversation(engine, tmp_path: Path):
    """The agent process dies with the backend; the next prompt after a restart loads the
    conversation under the agent's own session id (kept on the session) instead of opening
    a new one."""
    record = tmp_path / "prompts.jsonl"
    async with live_api(engine, record) as live:
        task, session = await start_session(live, "/reply one")
        await idle(live, task, session)
    async with live_api(engine, record) as live:
        again = await live.http.post(
            f"/api/v1/task-sessions/{session}/prompt", json={"content": "/reply two"}
        )
        assert again.status_code == 202, again.text
        await eventually(lambda: agent_replies(live, session), lambda r: r == ["one", "two"])
    first, second = [p for p in map(json.loads, record.read_text().splitlines())]
    assert first["acp_session_id"] == second["acp_session_id"]
    async with read_tx(engine) as conn:
        stored = (
            await conn.execute(select(sessions.c.agent_session_id).where(sessions.c.id == session))
        ).scalar_one()
    assert stored == first["acp_session_id"]
