"""Small HTTP helpers shared by the API tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlmodel import SQLModel

from backend.db.engine import read_tx
from tests.support.builders import World
from tests.support.live import LiveApi
from tests.support.processes import eventually


async def start_session(live: LiveApi, prompt: str) -> tuple[str, str]:
    task = await World(live.runtime.engine).task()
    response = await live.http.post(f"/api/v1/tasks/{task}/task-sessions", json={"prompt": prompt})
    assert response.status_code == 201, response.text
    return task, response.json()["id"]


async def session_of(live: LiveApi, task_id: str, session_id: str) -> dict:
    response = await live.http.get(f"/api/v1/tasks/{task_id}/task-sessions")
    assert response.status_code == 200, response.text
    (session,) = [s for s in response.json()["sessions"] if s["id"] == session_id]
    return session


async def bundles(live: LiveApi, session_id: str) -> list[dict]:
    response = await live.http.get(f"/api/v1/task-sessions/{session_id}/clarifications")
    assert response.status_code == 200, response.text
    return response.json()["bundles"]


async def messages(live: LiveApi, session_id: str) -> list[dict]:
    response = await live.http.get(f"/api/v1/task-sessions/{session_id}/messages")
    assert response.status_code == 200, response.text
    return response.json()["messages"]


async def turns(live: LiveApi, session_id: str) -> list[dict]:
    response = await live.http.get(f"/api/v1/task-sessions/{session_id}/turns")
    return response.json()["turns"]


async def idle(live: LiveApi, task_id: str, session_id: str, state: str = "IDLE") -> dict:
    return await eventually(
        lambda: session_of(live, task_id, session_id), lambda s: s["state"] == state
    )


def detach_events(live: LiveApi, session_id: str) -> list[dict]:
    return [
        e.data["message"]
        for e in live.events_of("session.message.updated")
        if e.data["session_id"] == session_id
        and e.data["message"]["metadata"].get("agent_disconnected")
    ]


async def respond(live: LiveApi, pending_id: str, body: dict) -> tuple[int, dict]:
    response = await live.http.post(f"/api/v1/clarification/{pending_id}/respond", json=body)
    return response.status_code, response.json()


def answer_all(bundle: dict, option: int = 0, text: str = "") -> dict:
    """An answer to every question of ``bundle``: option number ``option`` (or free text)."""
    answers = []
    for question in bundle["questions"]:
        options = [o["id"] for o in question["options"]]
        chosen = [options[option]] if options and not text else []
        answers.append({"message_id": question["message_id"], "option_ids": chosen, "text": text})
    return {"answers": answers}


async def agent_replies(live: LiveApi, session_id: str) -> list[str]:
    return [
        m["content"]
        for m in await messages(live, session_id)
        if m["author"] == "agent" and m["type"] == "message"
    ]


async def detached_bundle(live: LiveApi, script: str) -> tuple[str, str, dict]:
    """A session whose question was asked and detached at once."""
    task, session = await start_session(live, script + "\n/disconnect")
    await idle(live, task, session, state="WAITING_FOR_INPUT")
    # Settled: the question is detached and the turn that asked it is paused (its last write),
    # so nothing of this session changes in the background afterwards.
    await eventually(lambda: turns(live, session), lambda t: t[-1]["completed_at"] is not None)
    (bundle,) = await bundles(live, session)
    assert bundle["state"] == "active_detached"
    return task, session, bundle


async def live_bundle(live: LiveApi, script: str) -> tuple[str, str, dict]:
    """A session whose agent is still waiting on its question."""
    task, session = await start_session(live, script + "\n/wait 600")
    (bundle,) = await eventually(lambda: bundles(live, session), lambda b: len(b) == 1)
    assert bundle["state"] == "active_live"
    return task, session, bundle


async def summary_settled(live: LiveApi, task_id: str, pending: str | None) -> dict:
    """The task's status summary once it advertises ``pending`` (the projector repairs it
    after the events, so a test comparing rows waits for that write first)."""

    async def summary() -> dict:
        response = await live.http.get(f"/api/v1/tasks/{task_id}")
        return response.json()["status_summary"]

    return await eventually(summary, lambda s: s["pending_action"] == pending)


async def dump(engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    async with read_tx(engine) as conn:
        for table in SQLModel.metadata.sorted_tables:
            rows = await conn.execute(select(table))
            out[table.name] = sorted((tuple(map(repr, r)) for r in rows), key=repr)
    return out
