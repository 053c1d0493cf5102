"""Multi-select questions: an agent may let the user pick several options of a question
(``/askmany`` in the mock scripts, ``multi_select`` in the long-poll and the MCP tool); any
other question takes at most one option, and a response breaking that is a 400 that writes
nothing."""

from __future__ import annotations

import pytest

from tests.support.http import (
    agent_replies,
    bundles,
    dump,
    idle,
    live_bundle,
    respond,
    summary_settled,
)
from tests.support.processes import eventually


def _options(question: dict, *labels: str) -> list[str]:
    return [o["id"] for o in question["options"] if o["label"] in labels]


async def test_several_options_of_a_multi_select_question_reach_the_agent(live):
    task, session, bundle = await live_bundle(live, "/askmany Which targets? | web | ios | android")
    (question,) = bundle["questions"]
    assert question["multi_select"] is True
    body = {
        "answers": [
            {
                "message_id": question["message_id"],
                "option_ids": _options(question, "web", "android"),
            }
        ]
    }
    status, result = await respond(live, bundle["pending_id"], body)
    assert (status, result["outcome"]) == (200, "delivered")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Which targets?: web, android"]


@pytest.mark.parametrize(
    ("script", "labels", "message"),
    [
        ("/ask Which DB? | SQLite | PostgreSQL", ("SQLite", "PostgreSQL"), "takes one option"),
        ("/askmany Which targets? | web | ios", ("web", "web"), "picked twice"),
    ],
)
async def test_a_response_breaking_the_questions_choice_is_refused_and_writes_nothing(
    live, script, labels, message
):
    task, session, bundle = await live_bundle(live, script)
    await summary_settled(live, task, "clarification")
    (question,) = bundle["questions"]
    ids = [next(o["id"] for o in question["options"] if o["label"] == label) for label in labels]
    before = await dump(live.runtime.engine)
    body = {"answers": [{"message_id": question["message_id"], "option_ids": ids}]}
    status, result = await respond(live, bundle["pending_id"], body)
    assert status == 400 and message in result["message"]
    assert await dump(live.runtime.engine) == before
    (still,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    assert still["state"] == "active_live"
