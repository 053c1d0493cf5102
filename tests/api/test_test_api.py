"""The test-only API QA suites drive faults through (``KANDEV_TEST_API=1``)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from backend import failpoints
from backend.api.app import create_api
from backend.config import Settings
from backend.runtime import Runtime
from tests.support.http import answer_all, detached_bundle, respond
from tests.support.processes import eventually


async def test_fault_points_are_set_listed_and_cleared(live):
    put = await live.http.put(
        "/api/v1/_test/failpoints/respond.after_claim", json={"action": "error", "count": 1}
    )
    assert put.status_code == 204
    listed = (await live.http.get("/api/v1/_test/failpoints")).json()["failpoints"]
    assert listed["respond.after_claim"]["action"] == "error"
    assert (
        await live.http.delete("/api/v1/_test/failpoints/respond.after_claim")
    ).status_code == 204
    assert (await live.http.get("/api/v1/_test/failpoints")).json()["failpoints"] == {}


async def test_agent_fault_is_forwarded_and_prompts_are_readable(live):
    _, session, bundle = await detached_bundle(live, "/ask Via test API? | yes")
    put = await live.http.put(
        "/api/v1/_test/failpoints/agentctl.prompt", json={"action": "reject", "count": 1}
    )
    assert put.status_code == 204
    status, body = await respond(live, bundle["pending_id"], answer_all(bundle))
    assert (status, body["retryable"]) == (500, True)
    prompts = (await live.http.get("/api/v1/_test/agent/prompts")).json()["prompts"]
    assert [p["session_id"] for p in prompts].count(session) == 1


async def test_mismatched_fault_actions_are_refused(live):
    bad = await live.http.put(
        "/api/v1/_test/failpoints/respond.after_claim", json={"action": "reject"}
    )
    assert bad.status_code == 400
    bad = await live.http.put("/api/v1/_test/failpoints/agentctl.prompt", json={"action": "hold"})
    assert bad.status_code == 400
    bad = await live.http.put("/api/v1/_test/failpoints/x", json={"action": "explode"})
    assert bad.status_code == 400


async def test_test_routes_do_not_exist_without_the_flag(engine):
    runtime = Runtime(engine, Settings(test_api=False))
    async with runtime.lifespan():
        transport = httpx.ASGITransport(app=create_api(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.get("/api/v1/_test/failpoints")
    assert response.status_code == 404


async def test_a_held_fault_point_lists_its_waiters_and_forgets_cancelled_ones(live):
    put = await live.http.put(
        "/api/v1/_test/failpoints/sessions.list", json={"action": "hold", "count": 1}
    )
    assert put.status_code == 204
    held = asyncio.ensure_future(failpoints.hit("sessions.list"))
    passed = asyncio.ensure_future(failpoints.hit("sessions.list"))  # count used up: no hold
    await passed

    def listed() -> Any:
        return failpoints.listing()["sessions.list"]

    await eventually(listed, lambda p: p["waiting"] == 1)
    assert listed()["hits"] == 1
    held.cancel()  # an aborted load stops waiting at once
    await eventually(listed, lambda p: p["waiting"] == 0)
    body = (await live.http.get("/api/v1/_test/failpoints")).json()["failpoints"]
    assert body["sessions.list"] == {
        "action": "hold",
        "ms": 0,
        "count": 0,
        "hits": 1,
        "waiting": 0,
    }
