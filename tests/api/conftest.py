"""API fixtures: the real mock agent process and the API served over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from backend import failpoints
from tests.support.live import LiveApi, live_api
from tests.support.processes import MockAgentProcess


@pytest.fixture(scope="module")
async def mock_agent(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MockAgentProcess]:
    agent = MockAgentProcess(
        tmp_path_factory.mktemp("mock-agent"), env={"KANDEV_CLARIFICATION_WAIT_S": "600"}
    )
    await agent.start()
    yield agent
    await agent.stop()


@pytest.fixture
async def live(engine, mock_agent: MockAgentProcess) -> AsyncIterator[LiveApi]:
    if not mock_agent.running:
        await mock_agent.start()  # a previous test killed it on purpose
    async with live_api(engine, mock_agent.url) as api:
        try:
            yield api
        finally:
            failpoints.clear_all()
            with contextlib.suppress(httpx.HTTPError):  # a test may have killed the agent
                await api.agent_fault(None)
