"""A worker that dies without cleanup (SIGKILL of its process alone, as the OOM killer does)
takes its agents with it: none goes on running after its worker is gone
(``backend/agents/lifeline.py``)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from backend.agents.lifeline import bound_to_worker
from tests.support.builders import World
from tests.support.processes import BackendProcess, alive, eventually


def agent_pids(record: Path, session: str) -> set[int]:
    lines = record.read_text().splitlines() if record.exists() else []
    return {p["agent_pid"] for p in map(json.loads, lines) if p["session_id"] == session}


@pytest.mark.skipif(bound_to_worker(["true"])[0] == "true", reason="needs Linux setpriv")
@pytest.mark.parametrize(
    ("script", "state"),
    [
        # The agent is inside its ask_user_clarification call when the worker dies.
        ("/ask Still there? | yes | no", "active_live"),
        # The agent is idle between turns (it stopped waiting for the answer).
        ("/ask Still there? | yes | no\n/disconnect", "active_detached"),
    ],
)
async def test_an_agent_does_not_outlive_its_killed_worker(
    tmp_path, database_url, engine, script, state
):
    record = tmp_path / "prompts.jsonl"
    process = BackendProcess(tmp_path, database_url, record)
    await process.start()
    pids: set[int] = set()
    try:
        async with httpx.AsyncClient(base_url=process.url, timeout=30) as http:
            task = await World(engine).task()
            created = await http.post(
                f"/api/v1/tasks/{task}/task-sessions", json={"prompt": script}
            )
            assert created.status_code == 201, created.text
            session = created.json()["id"]

            async def bundles() -> list[dict]:
                response = await http.get(f"/api/v1/task-sessions/{session}/clarifications")
                return response.json()["bundles"]

            await eventually(bundles, lambda b: len(b) == 1 and b[0]["state"] == state)
        pids = agent_pids(record, session)
        assert len(pids) == 1 and all(alive(pid) for pid in pids)

        os.kill(process.pid, signal.SIGKILL)  # the worker alone, not its process group
        assert await process.exited() == -signal.SIGKILL
        await eventually(lambda: [pid for pid in pids if alive(pid)], lambda left: not left)
    finally:
        await process.kill()
        for pid in pids:  # never leave one behind, even when the test fails
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
