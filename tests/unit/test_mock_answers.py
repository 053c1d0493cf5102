"""Pure pieces of the mock agent and its record: answer formatting, torn record lines."""

from __future__ import annotations

import json
from pathlib import Path

from backend.agents.acp_executor import AcpExecutor
from backend.agents.mock_script import answer_reply, format_answers
from backend.agents.profiles import load_profiles


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


async def test_a_torn_last_record_line_is_skipped(tmp_path: Path) -> None:
    """The mock agent killed mid-write leaves half a line: the record still reads."""
    record = tmp_path / "record.jsonl"
    record.write_text(json.dumps({"turn_id": "t1"}) + "\n" + '{"turn_id": "t2", "cont')
    executor = AcpExecutor(load_profiles(None, mock_record=str(record)))
    assert [entry["turn_id"] for entry in await executor.prompts()] == ["t1"]
