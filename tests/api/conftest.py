"""API fixtures: the API served over HTTP, running the ACP mock agent per session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend import failpoints
from tests.support.live import LiveApi, live_api


@pytest.fixture
async def live(engine, tmp_path: Path) -> AsyncIterator[LiveApi]:
    async with live_api(engine, tmp_path / "agent-prompts.jsonl") as api:
        try:
            yield api
        finally:
            failpoints.clear_all()
