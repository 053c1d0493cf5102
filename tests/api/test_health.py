"""``GET /api/v1/health`` reports database reachability without leaking internals."""

from __future__ import annotations

import httpx

from backend.api.app import create_api
from backend.db.engine import create_engine


async def _get(api, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=api)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get(path)


async def test_health_is_ok_when_the_database_answers(engine):
    response = await _get(create_api(engine), "/api/v1/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


async def test_health_is_503_without_a_stack_trace_when_the_database_is_down():
    unreachable = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        response = await _get(create_api(unreachable), "/api/v1/health")
    finally:
        await unreachable.dispose()
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "database": "unreachable"}
    assert "Traceback" not in response.text


async def test_openapi_document_is_served():
    response = await _get(create_api(), "/api/v1/openapi.json")
    assert response.status_code == 200
    assert "/api/v1/health" in response.json()["paths"]
