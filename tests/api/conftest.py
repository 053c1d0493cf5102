"""API fixtures: the real mock agent process and the API served over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from backend import failpoints
from tests.live import LiveApi, MockAgent, live_api


@pytest.fixture(scope="module")
def mock_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockAgent]:
    agent = MockAgent(tmp_path_factory.mktemp("mock-agent"))
    agent.start()
    yield agent
    agent.kill()


@pytest.fixture
async def live(engine, mock_agent: MockAgent) -> AsyncIterator[LiveApi]:
    if mock_agent.process is None or mock_agent.process.poll() is not None:
        mock_agent.start()  # a previous test killed it on purpose
    async with live_api(engine, mock_agent.url) as api:
        try:
            yield api
        finally:
            failpoints.clear_all()
            with contextlib.suppress(httpx.HTTPError):  # a test may have killed the agent
                await api.agent_fault(None)
