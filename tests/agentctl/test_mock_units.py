"""Pure pieces of the mock agent: failpoint settings, answer formatting, the durable record."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.agentctl.mock.failpoints import FailpointSpecError, PromptFailpoint, from_env_spec
from backend.agentctl.mock.record import PromptRecord
from backend.agentctl.mock.runner import answer_reply, format_answers


def test_failpoint_count_runs_out() -> None:
    failpoint = PromptFailpoint()
    failpoint.arm("reject", 2)
    assert [failpoint.take() for _ in range(3)] == ["reject", "reject", None]


def test_failpoint_without_count_stays_until_cleared() -> None:
    failpoint = from_env_spec(" agentctl.prompt=timeout ; ")
    assert [failpoint.take() for _ in range(3)] == ["timeout"] * 3
    failpoint.clear()
    assert failpoint.take() is None


def test_failpoint_env_spec_with_count() -> None:
    failpoint = from_env_spec("agentctl.prompt=accept_then_fail:1")
    assert (failpoint.action, failpoint.remaining) == ("accept_then_fail", 1)
    assert from_env_spec("").action is None


@pytest.mark.parametrize(
    "spec",
    [
        "agentctl.prompt=crash",
        "other=reject",
        "agentctl.prompt",
        "agentctl.prompt=reject:0",
        "agentctl.prompt=reject:x",
    ],
)
def test_bad_failpoint_specs_are_refused(spec: str) -> None:
    with pytest.raises(FailpointSpecError):
        from_env_spec(spec)


def test_answers_are_formatted_question_by_question() -> None:
    answers = [
        {"question": "DB?", "option_labels": ["Postgres", "SQLite"], "text": ""},
        {"question": "Why?", "option_labels": [], "text": "speed"},
        {"question": "Both?", "option_labels": ["Yes"], "text": "mostly"},
    ]
    assert format_answers(answers) == "Got: DB?: Postgres, SQLite; Why?: speed; Both?: Yes, mostly"
    assert format_answers(None) == "Got: "


def test_a_skipped_resume_answer_replies_skipped() -> None:
    assert answer_reply({"pending_id": "p", "rejected": True, "answers": []}) == "Skipped."


async def test_the_record_is_read_back_across_instances(tmp_path: Path) -> None:
    await PromptRecord(tmp_path).append({"turn_id": "t1"})
    await PromptRecord(tmp_path).append({"turn_id": "t2"})
    assert [e["turn_id"] for e in await PromptRecord(tmp_path).entries()] == ["t1", "t2"]


async def test_a_torn_last_line_is_skipped_and_not_glued_to_the_next(tmp_path: Path) -> None:
    record = PromptRecord(tmp_path)
    await record.append({"turn_id": "t1"})
    with record.path.open("a") as file:
        file.write('{"turn_id": "t2", "cont')  # kill -9 mid-write

    restarted = PromptRecord(tmp_path)
    assert [e["turn_id"] for e in await restarted.entries()] == ["t1"]
    await restarted.append({"turn_id": "t3"})
    assert [e["turn_id"] for e in await restarted.entries()] == ["t1", "t3"]
