"""Bad input is a clear 400 on both databases, never a database error (found by the fuzzer)."""

from __future__ import annotations

import pytest

from tests.support.http import dump, idle, start_session


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/v1/tasks/a%00b", None),
        ("GET", "/api/v1/tasks?workspace_id=%00", None),
        ("POST", "/api/v1/tasks", {"title": "a\u0000b"}),
        ("POST", "/api/v1/tasks", {"title": "ok", "description": "a\u0000b"}),
        ("POST", "/api/v1/task-sessions/{session}/prompt", {"content": "a\u0000"}),
        ("POST", "/api/v1/tasks/{task}/task-sessions", {"prompt": "hi", "agent_profile": "nope"}),
    ],
    ids=["path", "query", "title", "description", "prompt", "unknown-profile"],
)
async def test_nul_characters_and_unknown_profiles_are_400_and_write_nothing(
    live, method, path, body
):
    task, session = await start_session(live, "/reply hi")
    await idle(live, task, session)
    await live.runtime.projector.stop()
    before = await dump(live.runtime.engine)
    response = await live.http.request(method, path.format(task=task, session=session), json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "validation"
    assert await dump(live.runtime.engine) == before
