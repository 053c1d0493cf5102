"""Agent processes end with the backend that started them, even when it is killed outright
(``backend/agents/lifetime.py``): nothing of a dead worker keeps running beside the agent a
surviving worker starts for the same session."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import httpx
import psutil
import pytest

from backend.agents.mock_acp import LINGER_ENV
from tests.support.builders import World
from tests.support.processes import BackendProcess, agent_processes, eventually


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="the kernel's parent-death signal")
async def test_an_agent_ends_when_its_backend_is_killed(tmp_path: Path, database_url: str, engine):
    task = await World(engine).task()
    # An agent that outlives its stdin: only the kernel's signal can end it.
    process = BackendProcess(
        tmp_path, database_url, tmp_path / "prompts.jsonl", **{LINGER_ENV: "600"}
    )
    await process.start()
    group = process.pid
    try:
        async with httpx.AsyncClient(base_url=process.url, timeout=30) as http:
            started = await http.post(
                f"/api/v1/tasks/{task}/task-sessions", json={"prompt": "/wait 600"}
            )
            assert started.status_code in (200, 201), started.text
        (agent,) = await eventually(lambda: agent_processes(group), lambda agents: len(agents) == 1)

        os.kill(group, signal.SIGKILL)  # the backend alone, as the OOM killer would

        gone, alive = psutil.wait_procs([agent], timeout=10)
        assert gone and not alive, "the agent outlived its backend"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        await process.stop()
