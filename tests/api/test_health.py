"""``GET /api/v1/health`` reports start-up and database reachability without leaking internals."""

from __future__ import annotations

import httpx
import pytest

from backend import failpoints
from backend.api.app import create_api
from backend.db.engine import create_engine
from backend.projections.revision import start_clock
from backend.runtime import Runtime


async def _get(api, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get(path)


async def test_health_is_503_starting_until_start_up_finishes(database_url, engine):
    # Its own engine, as a restarted process has; the runtime disposes it when it stops.
    runtime = Runtime(create_engine(database_url), owns_engine=True)
    api = create_api(runtime)
    before = await _get(api, "/api/v1/health")
    assert before.status_code == 503
    assert before.json() == {"status": "starting"}

    before_start = await (await start_clock(engine)).reserve()
    async with runtime.lifespan():
        after = await _get(api, "/api/v1/health")
        assert after.status_code == 200
        assert after.json() == {"status": "ok", "database": "ok"}
        # A started backend's revisions are newer than any handed out before it started.
        assert await runtime.revisions.reserve() > before_start
    assert not runtime.ready


async def test_health_is_503_without_a_stack_trace_when_the_database_is_down(engine):
    runtime = Runtime(engine)
    async with runtime.lifespan():
        runtime.engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
        try:
            response = await _get(create_api(runtime), "/api/v1/health")
        finally:
            await runtime.engine.dispose()
            runtime.engine = engine
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "database": "unreachable"}
    assert "Traceback" not in response.text


async def test_openapi_document_is_served(engine):
    response = await _get(create_api(Runtime(engine)), "/api/v1/openapi.json")
    assert response.status_code == 200
    assert "/api/v1/health" in response.json()["paths"]


@pytest.mark.scenario("S35")
@pytest.mark.parametrize(
    "point",
    ["recovery.reservations", "recovery.intents", "recovery.permissions", "recovery.replay"],
)
@pytest.mark.fault(
    "recovery.*", "error", "start-up fails, health 503 starting, next start recovers"
)
async def test_failed_recovery_fails_start_up_before_any_work_is_admitted(engine, point):
    runtime = Runtime(engine)
    api = create_api(runtime)
    failpoints.configure(point, "error", count=1)
    try:
        with pytest.raises(failpoints.FailpointError):
            await runtime.start()
    finally:
        failpoints.clear_all()
    assert not runtime.ready
    assert (await _get(api, "/api/v1/health")).json() == {"status": "starting"}
    refused = await _get(api, "/api/v1/task-sessions/any/turns")
    assert refused.status_code == 503 and refused.json()["error"] == "starting"

    await runtime.start()  # the next start retries recovery and succeeds
    try:
        assert runtime.ready
    finally:
        await runtime.stop()
