"""Crash tests: a real backend process is killed at a durable boundary and started again."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def agent_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the mock agents of every backend process of a module record their prompts: the
    file outlives the processes, so a test counts dispatches across crashes."""
    return tmp_path_factory.mktemp("crash-agent") / "prompts.jsonl"
