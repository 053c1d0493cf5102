"""An unexpected error is a 500 in the contract's shape, handled inside the app: the server
never sees the exception, so it keeps the kept-alive connection open for the next request."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from backend import failpoints
from tests.support.builders import World

INTERNAL = {"error": "internal", "message": "internal server error"}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def server_log() -> Iterator[list[logging.LogRecord]]:
    """What uvicorn logs (its loggers do not propagate to pytest's ``caplog``)."""
    handler = _Records()
    logger = logging.getLogger("uvicorn.error")
    logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)


@pytest.fixture
async def one_connection(live) -> AsyncIterator[tuple[httpx.AsyncClient, list[str]]]:
    """A client with a single pooled keep-alive connection, and the TCP connects it made."""
    connects: list[str] = []

    async def trace(event: str, _: dict[str, Any]) -> None:
        if event == "connection.connect_tcp.started":
            connects.append(event)

    async def add_trace(request: httpx.Request) -> None:
        request.extensions["trace"] = trace

    async with httpx.AsyncClient(
        base_url=live.url,
        timeout=30,
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        event_hooks={"request": [add_trace]},
    ) as client:
        yield client, connects


async def assert_internal_then_reused(
    client: httpx.AsyncClient, connects: list[str], failing: str, working: str
) -> None:
    with server_log() as logged:
        response = await client.get(failing)
        assert response.status_code == 500
        assert response.json() == INTERNAL
        assert "secret detail" not in response.text and "Traceback" not in response.text
        assert response.headers.get("connection") != "close"
        assert (await client.get(working)).status_code == 200
    assert connects == ["connection.connect_tcp.started"], "the connection was not reused"
    assert not [r for r in logged if "Exception in ASGI application" in r.getMessage()]


async def test_fault_point_error_is_a_500_and_the_connection_survives(live, one_connection, caplog):
    client, connects = one_connection
    task = await World(live.runtime.engine).task()
    failpoints.configure("sessions.list", "error", count=1)
    await assert_internal_then_reused(
        client,
        connects,
        f"/api/v1/tasks/{task}/task-sessions",
        f"/api/v1/tasks/{task}/task-sessions",
    )
    (record,) = [r for r in caplog.records if r.name == "backend.api.app"]
    assert record.levelno == logging.ERROR and record.exc_info  # the trace stays server-side


async def test_unexpected_exception_is_a_500_without_details(live, one_connection, monkeypatch):
    client, connects = one_connection
    task = await World(live.runtime.engine).task()

    async def broken(*_: Any) -> dict[str, Any]:
        raise RuntimeError("secret detail")

    monkeypatch.setattr("backend.services.tasks.one_task_view", broken)
    await assert_internal_then_reused(client, connects, f"/api/v1/tasks/{task}", "/api/v1/tasks")
