"""Fixtures: one mock agent process and one fake backend shared by the module's tests.

Each test uses its own session id, so shared processes cannot mix up their results; tests that
need a fresh process (restart, start-up failpoints) start their own ``MockAgentProcess``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from backend.agentctl import AgentctlClient
from tests.agentctl.harness import (
    ACK_TIMEOUT_S,
    DEFAULT_WAIT_S,
    FakeBackend,
    MockAgentProcess,
    serve_fake_backend,
)


@pytest.fixture(scope="module")
async def fake_backend() -> AsyncIterator[FakeBackend]:
    async with serve_fake_backend() as backend:
        yield backend


@pytest.fixture(scope="module")
async def mock_agent(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[MockAgentProcess]:
    agent = MockAgentProcess(
        tmp_path_factory.mktemp("mock-agent") / "state",
        env={"KANDEV_CLARIFICATION_WAIT_S": str(DEFAULT_WAIT_S)},
    )
    await agent.start()
    yield agent
    await agent.stop()


@pytest.fixture
async def client(mock_agent: MockAgentProcess) -> AsyncIterator[AgentctlClient]:
    async with AgentctlClient(mock_agent.url, ack_timeout_s=ACK_TIMEOUT_S) as agentctl:
        yield agentctl
        await agentctl.clear_failpoint()


@pytest.fixture
def session_id() -> str:
    return f"s-{uuid.uuid4().hex}"
