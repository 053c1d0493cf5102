"""The real mock agent process runs prompt scripts and calls a fake backend back."""

from __future__ import annotations

import httpx

from backend.agentctl import AgentctlClient
from tests.agentctl.harness import (
    DEFAULT_WAIT_S,
    Callback,
    FakeBackend,
    MockAgentProcess,
    make_prompt,
)
from tests.support.processes import eventually


async def _completed(backend: FakeBackend, session_id: str) -> Callback:
    return await eventually(lambda: backend.completion(session_id))


async def test_plain_text_gets_an_echo_and_the_turn_completes(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    request = make_prompt(fake_backend, session_id, "hello there", generation=3)
    await client.dispatch_prompt(request)

    done = await _completed(fake_backend, session_id)
    assert done.turn_id == request.turn_id
    assert done.body == {"prompt_generation": 3, "status": "completed"}
    [message] = fake_backend.of(session_id, "message")
    assert message.body == {
        "turn_id": request.turn_id,
        "prompt_generation": 3,
        "content": "Echo: hello there",
    }


async def test_reply_lines_are_posted_in_order(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    await client.dispatch_prompt(make_prompt(fake_backend, session_id, "/reply one\n/reply two"))

    assert (await _completed(fake_backend, session_id)).body["status"] == "completed"
    assert fake_backend.messages(session_id) == ["one", "two"]


async def test_two_asks_form_one_bundle_and_an_answer_gets_got(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    content = "/ask Which DB? | Postgres | SQLite\n/reply thinking\n/ask Name?\n/wait 45"
    request = make_prompt(fake_backend, session_id, content)
    await client.dispatch_prompt(request)

    await fake_backend.resolve(
        session_id,
        "answered",
        answers=[
            {
                "message_id": "m1",
                "question": "Which DB?",
                "option_labels": ["Postgres"],
                "text": "",
            },
            {"message_id": "m2", "question": "Name?", "option_labels": [], "text": "kandev"},
        ],
    )
    assert (await _completed(fake_backend, session_id)).body["status"] == "completed"
    [ask] = fake_backend.of(session_id, "clarification")
    assert ask.body == {
        "turn_id": request.turn_id,
        "prompt_generation": 1,
        "questions": [
            {"question": "Which DB?", "options": ["Postgres", "SQLite"], "multi_select": False},
            {"question": "Name?", "options": [], "multi_select": False},
        ],
        "wait_seconds": 45,
    }
    # The bundle stands where the first /ask stood; later steps run after the answer.
    assert fake_backend.messages(session_id) == [
        "Got: Which DB?: Postgres; Name?: kandev",
        "thinking",
    ]


async def test_a_live_skip_gets_skipped(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    await client.dispatch_prompt(make_prompt(fake_backend, session_id, "/ask Proceed? | Yes | No"))

    await fake_backend.resolve(session_id, "rejected")
    assert (await _completed(fake_backend, session_id)).body["status"] == "completed"
    assert fake_backend.messages(session_id) == ["Skipped."]


async def test_a_detached_bundle_completes_the_turn_without_a_message(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    await client.dispatch_prompt(make_prompt(fake_backend, session_id, "/ask Proceed?\n/reply x"))

    await fake_backend.resolve(session_id, "detached")
    assert (await _completed(fake_backend, session_id)).body["status"] == "completed"
    assert fake_backend.messages(session_id) == []
    [ask] = fake_backend.of(session_id, "clarification")
    assert ask.body["wait_seconds"] == DEFAULT_WAIT_S  # KANDEV_CLARIFICATION_WAIT_S


async def test_disconnect_asks_with_wait_zero_and_completes(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    content = "/disconnect\n/ask Proceed?\n/wait 30"
    await client.dispatch_prompt(make_prompt(fake_backend, session_id, content))

    assert (await _completed(fake_backend, session_id)).body["status"] == "completed"
    [ask] = fake_backend.of(session_id, "clarification")
    assert ask.body["wait_seconds"] == 0
    assert fake_backend.messages(session_id) == []


async def test_fail_ends_the_turn_as_failed(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    content = "/reply partial\n/sleep 20\n/fail\n/reply never"
    await client.dispatch_prompt(make_prompt(fake_backend, session_id, content))

    assert (await _completed(fake_backend, session_id)).body["status"] == "failed"
    assert fake_backend.messages(session_id) == ["partial"]


async def test_a_resume_prompt_replies_got_from_its_answer(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    answer = {
        "pending_id": "p1",
        "rejected": False,
        "answers": [{"question": "Which DB?", "option_labels": ["SQLite"], "text": "for now"}],
    }
    request = make_prompt(fake_backend, session_id, "/fail", turn="t2", generation=2, answer=answer)
    await client.dispatch_prompt(request)

    done = await _completed(fake_backend, session_id)
    assert done.turn_id == request.turn_id
    assert done.body == {"prompt_generation": 2, "status": "completed"}
    assert fake_backend.messages(session_id) == ["Got: Which DB?: SQLite, for now"]


async def test_a_superseded_turn_stops_without_completing(
    client: AgentctlClient,
    fake_backend: FakeBackend,
    mock_agent: MockAgentProcess,
    session_id: str,
) -> None:
    fake_backend.superseded.add(session_id)
    request = make_prompt(fake_backend, session_id, "/reply a\n/reply b")
    await client.dispatch_prompt(request)

    # The runner's own log line proves it has finished; only then is "no completion" final.
    await eventually(lambda: f"turn {request.turn_id} superseded" in mock_agent.log())
    assert [c.status_code for c in fake_backend.of(session_id)] == [409]


async def test_an_expired_bundle_stops_the_turn_without_completing(
    client: AgentctlClient,
    fake_backend: FakeBackend,
    mock_agent: MockAgentProcess,
    session_id: str,
) -> None:
    request = make_prompt(fake_backend, session_id, "/ask Proceed?\n/reply never")
    await client.dispatch_prompt(request)

    await fake_backend.resolve(session_id, "expired")
    await eventually(lambda: f"turn {request.turn_id}: session ended" in mock_agent.log())
    assert [c.kind for c in fake_backend.of(session_id)] == ["clarification"]


async def test_prompts_are_recorded_in_order(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    for turn in ("t1", "t2"):
        await client.dispatch_prompt(make_prompt(fake_backend, session_id, turn, turn=turn))

    mine = [p for p in await client.prompts() if p["session_id"] == session_id]
    assert [(p["turn_id"], p["content"]) for p in mine] == [
        (f"{session_id}-t1", "t1"),
        (f"{session_id}-t2", "t2"),
    ]
    assert set(mine[0]) == {"session_id", "turn_id", "content", "accepted_at"}


async def test_a_malformed_prompt_is_a_400_without_details(mock_agent: MockAgentProcess) -> None:
    async with httpx.AsyncClient(base_url=mock_agent.url) as http:
        response = await http.post("/v1/prompts", json={"session_id": "s", "content": 1})
    assert response.status_code == 400
    assert response.json() == {"error": "invalid_request"}
