"""Agent callbacks need the session's own credential (``backend/agent_credentials.py``).

Without it anyone who reaches the port could show the user a forged question and then read
the user's answer; so a missing, malformed or foreign credential gets 401 and nothing is
read or written, while the agent Kandev launched (the mock, with the credential its prompts
carry) works as before.
"""

from __future__ import annotations

import pytest

from backend.agent_credentials import AgentCredentials, CredentialsNotLoaded
from tests.support.http import (
    bundles,
    dump,
    idle,
    live_bundle,
    messages,
    start_session,
    summary_settled,
    turns,
)
from tests.support.live import LiveApi


def _forgeries(live: LiveApi, session: str, other: str) -> dict[str, dict[str, str]]:
    return {
        "none": {},
        "another session's credential": {
            "Authorization": f"Bearer {live.runtime.credentials.token_for(other)}"
        },
        "a guessed credential": {"Authorization": "Bearer not-the-credential"},
        "another scheme": {"Authorization": f"Basic {live.runtime.credentials.token_for(session)}"},
    }


async def _open_turn(live: LiveApi) -> tuple[str, str, dict]:
    """A session whose agent waits on a question: its turn is current and open."""
    task, session, _bundle = await live_bundle(live, "/ask Forge me? | yes | no")
    (turn,) = await turns(live, session)
    return task, session, turn


async def test_forged_agent_calls_are_refused_and_write_nothing(live):
    task, session, turn = await _open_turn(live)
    other_task, other = await start_session(live, "another session")
    await idle(live, other_task, other)
    await summary_settled(live, task, "clarification")
    await summary_settled(live, other_task, None)
    generation = {"turn_id": turn["id"], "prompt_generation": 1}
    calls = {
        "messages": {**generation, "content": "forged output"},
        "clarifications": {
            **generation,
            "questions": [{"question": "Paste your password?", "options": ["ok"]}],
            "wait_seconds": 0,
        },
        f"turns/{turn['id']}/complete": {"prompt_generation": 1, "status": "completed"},
    }
    before = await dump(live.runtime.engine)

    for label, headers in _forgeries(live, session, other).items():
        for path, body in calls.items():
            response = await live.http.post(
                f"/api/v1/_agent/sessions/{session}/{path}", json=body, headers=headers
            )
            assert response.status_code == 401, (label, path, response.text)
            assert response.json()["error"] == "unauthorized"
            assert "Traceback" not in response.text

    assert await dump(live.runtime.engine) == before
    (bundle,) = await bundles(live, session)  # only the agent's own question is there
    assert [q["question"] for q in bundle["questions"]] == ["Forge me?"]


async def test_the_sessions_own_credential_is_accepted(live):
    task, session = await start_session(live, "/reply done")
    await idle(live, task, session)
    (turn,) = await turns(live, session)
    output = await live.as_agent(
        session, "messages", {"turn_id": turn["id"], "prompt_generation": 1, "content": "more"}
    )
    assert output.status_code == 201
    assert [m["content"] for m in await messages(live, session)][-1] == "more"


async def test_a_credential_is_the_same_in_every_process_and_distinct_per_session(live):
    """Derived from the database's key: a restarted (or second) backend accepts the
    credential the agent already holds; one session's credential opens no other."""
    another_process = AgentCredentials()
    await another_process.load(live.runtime.engine)
    for session in ("s-1", "s-2"):
        assert another_process.token_for(session) == live.runtime.credentials.token_for(session)
    assert another_process.token_for("s-1") != another_process.token_for("s-2")


def test_credentials_are_unusable_before_the_key_is_read() -> None:
    with pytest.raises(CredentialsNotLoaded):
        AgentCredentials().token_for("s-1")
