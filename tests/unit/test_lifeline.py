"""How an agent's command is wrapped so that it dies with its worker (``setpriv``)."""

from __future__ import annotations

import os
import stat

import pytest

from backend.agents import lifeline

pytestmark = pytest.mark.skipif(lifeline._setpriv() is None, reason="needs Linux setpriv")


def test_the_command_runs_under_a_parent_death_signal():
    wrapped = lifeline.bound_to_worker(["sh", "-c", "exit 0"])
    assert wrapped[0].endswith("/setpriv")
    assert wrapped[1:3] == ["--pdeathsig=TERM", "--"]
    assert os.path.basename(wrapped[3]) == "sh" and wrapped[4:] == ["-c", "exit 0"]


def test_a_missing_program_fails_as_starting_it_directly_would():
    with pytest.raises(FileNotFoundError):
        lifeline.bound_to_worker(["kandev-no-such-agent", "--acp"])


def test_the_program_is_found_on_the_agents_path_and_relative_to_its_directory(tmp_path):
    program = tmp_path / "bin" / "my-agent"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    on_path = lifeline.bound_to_worker(["my-agent"], path=str(program.parent))
    assert on_path[3] == str(program)
    relative = lifeline.bound_to_worker(["./bin/my-agent"], cwd=str(tmp_path))
    assert relative[3] == str(program)
    with pytest.raises(FileNotFoundError):
        lifeline.bound_to_worker(["./bin/my-agent"], cwd=str(tmp_path / "elsewhere"))
