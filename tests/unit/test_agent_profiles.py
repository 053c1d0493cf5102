"""Agent profiles (``backend/agents/profiles.py``) and how the runtime picks its executor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.agents.profiles import BUILT_IN, MOCK_RECORD_ENV, load_profiles


def test_the_built_in_profiles_name_the_mock_and_the_documented_agents() -> None:
    assert {"mock", "claude-code", "codex"} <= set(load_profiles())
    assert BUILT_IN["mock"].command[-2:] == ("-m", "backend.agents.mock_acp")


def test_a_profiles_file_adds_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "agents.json"
    path.write_text(
        json.dumps(
            {
                "gemini": {"command": ["gemini", "--experimental-acp"], "env": {"A": "1"}},
                "codex": {"command": ["/opt/codex-acp"], "cwd": "/srv/repo"},
            }
        )
    )
    profiles = load_profiles(str(path))
    assert profiles["gemini"].command == ("gemini", "--experimental-acp")
    assert profiles["gemini"].env == {"A": "1"}
    assert (profiles["codex"].command, profiles["codex"].cwd) == (("/opt/codex-acp",), "/srv/repo")
    assert profiles["mock"] == BUILT_IN["mock"]


def test_the_mock_records_its_prompts_where_asked() -> None:
    profiles = load_profiles(mock_record="/tmp/record.jsonl")
    assert profiles["mock"].env == {MOCK_RECORD_ENV: "/tmp/record.jsonl"}
    assert profiles["mock"].command == BUILT_IN["mock"].command


@pytest.mark.parametrize("name", ["", "a b", "x" * 101, "../up"])
def test_a_profile_name_is_a_plain_word(tmp_path: Path, name: str) -> None:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({name: {"command": ["agent"]}}))
    with pytest.raises(ValueError, match="names are"):
        load_profiles(str(path))


@pytest.mark.parametrize("command", [None, [], "codex", [1, 2]])
def test_a_profile_needs_a_command_list(tmp_path: Path, command: object) -> None:
    path = tmp_path / "agents.json"
    path.write_text(json.dumps({"bad": {"command": command}}))
    with pytest.raises(ValueError, match="'command'"):
        load_profiles(str(path))
