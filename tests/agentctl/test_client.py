"""How ``AgentctlClient`` maps agent answers to outcomes (in-memory transport)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from backend.agentctl import (
    AgentctlClient,
    AgentctlUnavailable,
    PromptNotAcknowledged,
    PromptRejected,
    PromptRequest,
    PromptTransportError,
)

REQUEST = PromptRequest("s1", "t1", 4, "hello", "http://backend", "secret-s1")


def _client(handler: Callable[[httpx.Request], httpx.Response]) -> AgentctlClient:
    return AgentctlClient("http://agent", ack_timeout_s=1, transport=httpx.MockTransport(handler))


async def test_202_accepted_returns_and_sends_the_protocol_body() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(202, json={"accepted": True})

    async with _client(handler) as client:
        await client.dispatch_prompt(REQUEST)
        await client.dispatch_prompt(
            PromptRequest("s1", "t2", 5, "", "http://backend", "secret-s1", {"a": 1})
        )
    assert seen[0] == {
        "session_id": "s1",
        "turn_id": "t1",
        "prompt_generation": 4,
        "content": "hello",
        "callback_url": "http://backend",
        "agent_token": "secret-s1",
    }
    assert seen[1]["answer"] == {"a": 1}


async def test_409_is_a_safe_rejection() -> None:
    async with _client(lambda _: httpx.Response(409, json={"error": "rejected"})) as client:
        with pytest.raises(PromptRejected) as caught:
            await client.dispatch_prompt(REQUEST)
    assert caught.value.maybe_delivered is False


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(500, text="Internal Server Error"),
        httpx.Response(200, json={"accepted": True}),
        httpx.Response(202, json={"accepted": False}),
        httpx.Response(202, text="not json"),
    ],
)
async def test_other_answers_are_ambiguous_transport_errors(response: httpx.Response) -> None:
    async with _client(lambda _: response) as client:
        with pytest.raises(PromptTransportError) as caught:
            await client.dispatch_prompt(REQUEST)
    assert caught.value.maybe_delivered is True
    assert caught.value.status_code == response.status_code
    assert "Traceback" not in str(caught.value)


async def test_a_connect_error_is_not_acknowledged_and_not_delivered() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with _client(handler) as client:
        with pytest.raises(PromptNotAcknowledged) as caught:
            await client.dispatch_prompt(REQUEST)
        assert caught.value.maybe_delivered is False
        assert await client.health() is False
        with pytest.raises(AgentctlUnavailable):
            await client.prompts()


def test_ack_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError):
        AgentctlClient("http://agent", ack_timeout_s=0)
