"""Questions an agent asks natively over ACP (``elicitation/create``, form mode): one bundle in
the asking turn, its pending request the live waiter; the end of the prompt that asked, the
agent's death or the client's wait limit detach it, and the answer then arrives as the next
prompt. The ACP mock asks this way with ``/elicit``."""

from __future__ import annotations

import pytest

from tests.acp.conftest import AcpLive
from tests.support.http import (
    agent_replies,
    answer_all,
    bundles,
    idle,
    respond,
    start_session,
    turns,
)
from tests.support.processes import eventually


async def _live_bundle(acp: AcpLive, script: str) -> tuple[str, str, dict]:
    task, session = await start_session(acp.api, script)
    (bundle,) = await eventually(lambda: bundles(acp.api, session), lambda b: len(b) == 1)
    return task, session, bundle


async def test_a_native_question_is_answered_live(acp):
    live = acp.api
    task, session, bundle = await _live_bundle(
        acp, "/reply Looking at the schema.\n/elicit\n/ask Which DB? | SQLite | PostgreSQL"
    )
    assert bundle["state"] == "active_live"
    (question,) = bundle["questions"]
    assert question["question"] == "Which DB?"
    assert [o["label"] for o in question["options"]] == ["SQLite", "PostgreSQL"]
    assert await agent_replies(live, session) == ["Looking at the schema."]
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle, option=1))
    assert (status, body["outcome"]) == (200, "delivered")
    await idle(live, task, session)
    replies = await agent_replies(live, session)
    assert replies == ["Looking at the schema.", "Got: Which DB?: PostgreSQL"]
    assert len(acp.prompts(session)) == 1  # answered in the same prompt


async def test_a_form_of_several_fields_is_one_bundle_and_its_content_comes_back_typed(acp):
    live = acp.api
    task, session, bundle = await _live_bundle(
        acp, "/elicit\n/askmany Targets? | linux | mac | windows\n/ask Project name?"
    )
    targets, name = bundle["questions"]
    assert (targets["question"], targets["multi_select"]) == ("Targets?", True)
    assert (name["question"], name["options"]) == ("Project name?", [])
    # The form's message is said first, then the fields are the questions.
    assert await agent_replies(live, session) == ["A few questions before I go on."]
    answers = [
        {
            "message_id": targets["message_id"],
            "option_ids": [targets["options"][0]["id"], targets["options"][2]["id"]],
            "text": "",
        },
        {"message_id": name["message_id"], "option_ids": [], "text": "kandev"},
    ]
    status, _ = await respond(live, bundle["pending_id"], {"answers": answers})
    assert status == 200
    await idle(live, task, session)
    replies = await agent_replies(live, session)
    assert replies[-1] == "Got: Targets?: linux, windows; Project name?: kandev"


async def test_a_skipped_native_question_is_declined(acp):
    live = acp.api
    task, session, bundle = await _live_bundle(acp, "/elicit\n/ask Deploy now? | yes | no")
    status, body = await respond(live, bundle["pending_id"], {"rejected": True})
    assert (status, body["outcome"]) == (200, "rejected")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Skipped."]


@pytest.mark.scenario("S01")
async def test_an_agent_that_stops_waiting_detaches_the_question_and_gets_the_answer_next(acp):
    live = acp.api
    task, session = await start_session(live, "/elicit\n/ask Deploy? | yes | no\n/disconnect")
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    (bundle,) = await bundles(live, session)
    assert bundle["state"] == "active_detached"
    await eventually(lambda: turns(live, session), lambda t: t[-1]["completed_at"] is not None)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Deploy?: yes"]
    assert len(acp.prompts(session)) == 2  # the first prompt, then the resume


async def test_the_clients_wait_limit_detaches_the_question(acp):
    acp.executor.elicitation_wait_s = 0.5
    live = acp.api
    task, session = await start_session(live, "/elicit\n/ask Deploy? | yes | no")
    (bundle,) = await eventually(
        lambda: bundles(live, session), lambda b: b and b[0]["state"] == "active_detached"
    )
    # The agent heard "detached" and ended its turn, which the detach had paused already.
    await eventually(lambda: turns(live, session), lambda t: t[-1]["completed_at"] is not None)
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle, option=1))
    assert (status, body["outcome"]) == (200, "resumed")
    await idle(live, task, session)
    assert await agent_replies(live, session) == ["Got: Deploy?: no"]


@pytest.mark.scenario("S01")
async def test_an_agent_that_dies_while_asking_leaves_the_question_answerable(acp):
    live = acp.api
    _, session, bundle = await _live_bundle(acp, "/elicit\n/ask Keep going? | yes | no")
    process = acp.executor.process_of(session)
    assert process is not None
    process.kill()
    await eventually(
        lambda: bundles(live, session), lambda b: b and b[0]["state"] == "active_detached"
    )
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["outcome"]) == (200, "resumed")
    await eventually(
        lambda: agent_replies(live, session), lambda r: r[-1:] == ["Got: Keep going?: yes"]
    )
    assert acp.executor.process_of(session) is not process


@pytest.mark.scenario("S02")
async def test_a_newer_prompt_supersedes_a_pending_native_question(acp):
    live = acp.api
    task, session, bundle = await _live_bundle(acp, "/elicit\n/ask Which way? | left | right")
    newer = await live.http.post(
        f"/api/v1/task-sessions/{session}/prompt", json={"content": "/reply going on"}
    )
    assert newer.status_code == 202, newer.text
    await eventually(lambda: agent_replies(live, session), lambda r: r[-1:] == ["going on"])
    await idle(live, task, session)
    assert await bundles(live, session) == []
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert status == 409 and body["state"] == "superseded_history"
    assert len(acp.prompts(session)) == 2
