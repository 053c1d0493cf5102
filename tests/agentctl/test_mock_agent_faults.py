"""Acknowledgement faults seen through the real client, and the record across a kill -9."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from backend.agentctl import (
    AgentctlClient,
    PromptNotAcknowledged,
    PromptRejected,
    PromptTransportError,
)
from tests.agentctl.harness import (
    ACK_TIMEOUT_S,
    FakeBackend,
    MockAgentProcess,
    make_prompt,
)
from tests.support.processes import eventually, free_port


async def _recorded(client: AgentctlClient, session_id: str) -> list[dict]:
    return [p for p in await client.prompts() if p["session_id"] == session_id]


async def test_reject_raises_prompt_rejected_and_records_nothing(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    await client.set_failpoint("reject", count=1)

    with pytest.raises(PromptRejected) as caught:
        await client.dispatch_prompt(make_prompt(fake_backend, session_id, "hi"))
    assert caught.value.maybe_delivered is False
    assert await _recorded(client, session_id) == []

    # count=1: the next prompt is accepted again.
    await client.dispatch_prompt(make_prompt(fake_backend, session_id, "hi", turn="t2"))
    assert [p["turn_id"] for p in await _recorded(client, session_id)] == [f"{session_id}-t2"]


async def test_timeout_is_not_acknowledged_within_the_deadline_and_records_nothing(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    await client.set_failpoint("timeout")
    loop = asyncio.get_running_loop()
    started = loop.time()
    dispatch = asyncio.create_task(
        client.dispatch_prompt(make_prompt(fake_backend, session_id, "x"))
    )

    # The held request does not stop the agent from serving others.
    async with AgentctlClient(client.base_url) as other:
        assert await other.health()
        assert not dispatch.done()

    with pytest.raises(PromptNotAcknowledged) as caught:
        await dispatch
    elapsed = loop.time() - started
    assert ACK_TIMEOUT_S - 0.1 <= elapsed < ACK_TIMEOUT_S + 1.5
    assert caught.value.maybe_delivered is True  # the request was sent: ambiguous
    assert await _recorded(client, session_id) == []


async def test_accept_then_fail_records_runs_and_drops_the_connection(
    client: AgentctlClient, fake_backend: FakeBackend, session_id: str
) -> None:
    await client.set_failpoint("accept_then_fail", count=1)

    with pytest.raises(PromptTransportError) as caught:
        await client.dispatch_prompt(make_prompt(fake_backend, session_id, "still runs"))
    assert caught.value.maybe_delivered is True
    assert caught.value.status_code is None  # no HTTP answer at all
    assert len(await _recorded(client, session_id)) == 1
    done = await eventually(lambda: fake_backend.completion(session_id))
    assert done.body["status"] == "completed"
    assert fake_backend.messages(session_id) == ["Echo: still runs"]


async def test_a_closed_port_is_not_acknowledged_and_certainly_not_delivered(
    fake_backend: FakeBackend, session_id: str
) -> None:
    async with AgentctlClient(f"http://127.0.0.1:{free_port()}", ack_timeout_s=2) as closed:
        with pytest.raises(PromptNotAcknowledged) as caught:
            await closed.dispatch_prompt(make_prompt(fake_backend, session_id, "x"))
    assert caught.value.maybe_delivered is False


async def test_the_record_survives_kill_9_and_restart(
    tmp_path: Path, fake_backend: FakeBackend, session_id: str
) -> None:
    agent = MockAgentProcess(tmp_path / "state")
    await agent.start()
    try:
        async with AgentctlClient(agent.url) as client:
            for turn in ("t1", "t2"):
                await client.dispatch_prompt(
                    make_prompt(fake_backend, session_id, "/sleep 1", turn=turn)
                )
            assert len(await client.prompts()) == 2

        await agent.kill()
        await agent.start()

        async with AgentctlClient(agent.url) as client:
            assert len(await client.prompts()) == 2
            await client.dispatch_prompt(make_prompt(fake_backend, session_id, "again", turn="t3"))
            turns = [p["turn_id"] for p in await client.prompts()]
        assert turns == [f"{session_id}-{t}" for t in ("t1", "t2", "t3")]
    finally:
        await agent.stop()


async def test_failpoints_can_be_set_from_the_environment(
    tmp_path: Path, fake_backend: FakeBackend, session_id: str
) -> None:
    agent = MockAgentProcess(
        tmp_path / "state", env={"KANDEV_MOCK_AGENT_FAILPOINTS": "agentctl.prompt=reject:1"}
    )
    await agent.start()
    try:
        async with AgentctlClient(agent.url) as client:
            with pytest.raises(PromptRejected):
                await client.dispatch_prompt(make_prompt(fake_backend, session_id, "x"))
            await client.dispatch_prompt(make_prompt(fake_backend, session_id, "x", turn="t2"))
            assert len(await client.prompts()) == 1
    finally:
        await agent.stop()


async def test_a_bad_failpoint_setting_is_refused_in_one_line(tmp_path: Path) -> None:
    agent = MockAgentProcess(
        tmp_path / "state", env={"KANDEV_MOCK_AGENT_FAILPOINTS": "agentctl.prompt=explode"}
    )
    with pytest.raises(AssertionError, match="mock-agent exited"):
        await agent.start()
    assert "mock agent: unknown action 'explode'" in agent.log()
    assert "Traceback" not in agent.log()
