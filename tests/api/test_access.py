"""Access control: a caller who cannot see a task gets 404 everywhere and writes nothing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets
from sqlalchemy import insert, select

from backend.access import hash_token
from backend.db.engine import read_tx, write_tx
from backend.db.tables import tasks
from backend.ids import new_id
from backend.models import User, Workspace, WorkspaceMembership
from tests.support.builders import T0
from tests.support.http import answer_all, detached_bundle, dump, messages

STRANGER = "stranger-token"
OWNER = "owner-token"


async def add_user(engine, token: str, workspace_id: str | None) -> str:
    """A user with ``token``, member of ``workspace_id`` (or of a fresh workspace of their
    own when ``None``)."""
    user_id = new_id()
    async with write_tx(engine) as conn:
        await conn.execute(
            insert(User.__table__).values(
                id=user_id,
                name=token,
                email=f"{token}@example.invalid",
                token_hash=hash_token(token),
                created_at=T0,
            )
        )
        if workspace_id is None:
            workspace_id = new_id()
            await conn.execute(
                insert(Workspace.__table__).values(id=workspace_id, name=token, created_at=T0)
            )
        await conn.execute(
            insert(WorkspaceMembership.__table__).values(workspace_id=workspace_id, user_id=user_id)
        )
    return user_id


async def scene(live) -> dict[str, str]:
    task, session, bundle = await detached_bundle(live, "/ask Visible? | yes")
    async with read_tx(live.runtime.engine) as conn:
        row = (await conn.execute(select(tasks).where(tasks.c.id == task))).one()
    await add_user(live.runtime.engine, STRANGER, None)
    await add_user(live.runtime.engine, OWNER, row.workspace_id)
    message = (await messages(live, session))[0]["id"]
    return {
        "task": task,
        "session": session,
        "pending": bundle["pending_id"],
        "message": message,
        "workspace": row.workspace_id,
        "workflow": row.workflow_id,
        "step": row.workflow_step_id,
        "answer": json.dumps(answer_all(bundle)),
    }


def task_routes(s: dict[str, str]) -> list[tuple[str, str, Any]]:
    """Every route that touches the task, its sessions, turns, messages or clarifications."""
    return [
        ("GET", f"/api/v1/tasks/{s['task']}", None),
        ("POST", f"/api/v1/tasks/{s['task']}/move", {"workflow_step_id": s["step"]}),
        ("GET", f"/api/v1/workflows/{s['workflow']}/snapshot", None),
        ("POST", "/api/v1/tasks", {"title": "intruder", "workspace_id": s["workspace"]}),
        ("GET", f"/api/v1/tasks/{s['task']}/task-sessions", None),
        ("POST", f"/api/v1/tasks/{s['task']}/task-sessions", {"prompt": "hi"}),
        ("POST", f"/api/v1/task-sessions/{s['session']}/prompt", {"content": "hi"}),
        ("POST", f"/api/v1/task-sessions/{s['session']}/state", {"state": "CANCELLED"}),
        ("GET", f"/api/v1/task-sessions/{s['session']}/turns", None),
        ("GET", f"/api/v1/task-sessions/{s['session']}/messages", None),
        ("DELETE", f"/api/v1/task-sessions/{s['session']}/messages/{s['message']}", None),
        ("GET", f"/api/v1/task-sessions/{s['session']}/clarifications", None),
        ("POST", f"/api/v1/clarification/{s['pending']}/respond", json.loads(s["answer"])),
        ("POST", f"/api/v1/clarification/{s['pending']}/respond", {"rejected": True}),
        ("POST", f"/api/v1/clarification/{s['pending']}/cancel", None),
    ]


async def call(live, method: str, path: str, body: Any, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return await live.http.request(method, path, json=body, headers=headers)


async def test_a_stranger_gets_404_from_every_task_route_and_writes_nothing(live):
    s = await scene(live)
    await live.runtime.projector.stop()  # nothing may write in the background while we compare
    before = await dump(live.runtime.engine)
    dispatched = len(await live.dispatched(s["session"]))
    for method, path, body in task_routes(s):
        response = await call(live, method, path, body, STRANGER)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"] == "not_found"
    assert await dump(live.runtime.engine) == before
    assert len(await live.dispatched(s["session"])) == dispatched


async def test_lists_hide_what_a_stranger_cannot_see(live):
    s = await scene(live)
    listed = (await call(live, "GET", "/api/v1/tasks", None, STRANGER)).json()["tasks"]
    assert s["task"] not in [t["id"] for t in listed]
    boot = (await call(live, "GET", "/api/v1/boot", None, STRANGER)).json()
    assert s["task"] not in [t["id"] for t in boot["tasks"]]
    assert s["workspace"] not in [w["id"] for w in boot["workspaces"]]
    assert s["workflow"] not in [w["id"] for w in boot["workflows"]]
    mine = (await call(live, "GET", "/api/v1/tasks", None, OWNER)).json()["tasks"]
    assert s["task"] in [t["id"] for t in mine]


async def test_a_member_reaches_every_route(live):
    s = await scene(live)
    for method, path, body in task_routes(s)[:-3]:  # respond/cancel change the scene
        response = await call(live, method, path, body, OWNER)
        assert response.status_code < 400, (method, path, response.text)


@pytest.mark.parametrize(
    "header", ["Bearer nope", "Basic abc", "Bearer"], ids=["unknown", "scheme", "empty"]
)
async def test_bad_tokens_are_401(live, header):
    response = await live.http.get("/api/v1/tasks", headers={"Authorization": header})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


async def test_without_single_user_mode_a_token_is_required(live, monkeypatch):
    s = await scene(live)
    monkeypatch.setattr(live.runtime.settings, "single_user", False)
    assert (await live.http.get("/api/v1/tasks")).status_code == 401
    assert (await call(live, "GET", f"/api/v1/tasks/{s['task']}", None, OWNER)).status_code == 200


async def test_the_event_stream_only_carries_visible_tasks(live):
    s = await scene(live)
    async with (
        live.websocket(STRANGER) as stranger,
        live.websocket(token=OWNER) as owner,
    ):
        await call(
            live, "POST", f"/api/v1/task-sessions/{s['session']}/prompt", {"content": "x"}, None
        )
        seen = json.loads(await asyncio.wait_for(owner.recv(), 10))
        assert seen["data"]["task_id"] == s["task"]
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stranger.recv(), 1.0)
        await stranger.send(
            json.dumps({"type": "task_sessions.list", "request_id": 1, "task_id": s["task"]})
        )
        frame = json.loads(await asyncio.wait_for(stranger.recv(), 10))
    assert (frame["type"], frame["data"]["status"]) == ("error", 404)


async def test_a_websocket_with_a_bad_token_is_refused(live):
    with pytest.raises(websockets.exceptions.InvalidStatus):
        async with live.websocket("nope"):
            pass
