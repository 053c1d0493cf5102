"""The ACP suites' live API: the runtime with its ACP executor and the mock agent recording
its prompts in the test's own file."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.agents.acp_executor import AcpExecutor
from backend.agents.profiles import BUILT_IN, MOCK, MOCK_RECORD_ENV, AgentProfile
from tests.support.live import LiveApi, live_api


class AcpLive:
    def __init__(self, api: LiveApi, executor: AcpExecutor, record: Path) -> None:
        self.api = api
        self.executor = executor
        self.record = record

    def prompts(self, session_id: str) -> list[dict]:
        """Prompts the mock agents recorded for ``session_id`` (every process appends)."""
        if not self.record.exists():
            return []
        lines = [json.loads(line) for line in self.record.read_text().splitlines()]
        return [p for p in lines if p["session_id"] == session_id]


def mock_profiles(record: Path, command: tuple[str, ...] | None = None) -> dict[str, AgentProfile]:
    """The profiles with the mock agent recording at ``record`` (launched by ``command``)."""
    mock = AgentProfile(MOCK, command or BUILT_IN[MOCK].command, env={MOCK_RECORD_ENV: str(record)})
    return {**BUILT_IN, MOCK: mock}


@pytest.fixture
async def acp(engine, tmp_path: Path) -> AsyncIterator[AcpLive]:
    record = tmp_path / "prompts.jsonl"
    async with live_api(engine, record) as api:
        yield AcpLive(api, api.executor, record)
