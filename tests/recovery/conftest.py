"""Crash tests: a real backend process is killed at a durable boundary and started again."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.support.processes import MockAgentProcess


@pytest.fixture(scope="module")
async def mock_agent(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MockAgentProcess]:
    agent = MockAgentProcess(tmp_path_factory.mktemp("crash-agent") / "state")
    await agent.start()
    yield agent
    await agent.stop()
