"""FastAPI application factory: the routes of ``shared/spec/api-contract.md`` under ``/api/v1``.

Errors have one JSON shape, ``{"error": code, "message": text, ...}``; validation failures are
400 (not FastAPI's 422) and unexpected failures are 500 without any internals.
"""

from __future__ import annotations

import logging
from urllib.parse import unquote_to_bytes

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import text
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api.routes import (
    agent,
    clarifications,
    events,
    sessions,
    tasks,
    testing,
    workflows,
)
from backend.errors import DomainError
from backend.runtime import Runtime

log = logging.getLogger(__name__)


def error(status: int, code: str, message: str, **extra: object) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=status)


class RefuseNulCharacters:
    """Identifiers and query values never contain NUL, and PostgreSQL text cannot hold it: a
    request whose path or query carries one is a 400 before any route runs, instead of a
    database error (500). Bodies are checked by :class:`backend.api.schemas.Body`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (
            "\x00" in scope.get("path", "")
            or b"\x00" in unquote_to_bytes(scope.get("query_string", b""))
        ):
            response = error(400, "validation", "the URL must not contain NUL characters")
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def create_api(runtime: Runtime) -> FastAPI:
    api = FastAPI(
        title="Kandev API",
        version="1",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )
    api.state.runtime = runtime
    api.add_middleware(RefuseNulCharacters)

    @api.exception_handler(DomainError)
    async def domain_error(_: Request, exc: DomainError) -> JSONResponse:
        return error(exc.status, exc.code, exc.message, **exc.extra)

    @api.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()
        ]
        return error(400, "validation", "the request is not valid", details=details)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error(exc.status_code, code, str(exc.detail))

    @api.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error(500, "internal", "internal server error")

    @api.get("/api/v1/health")
    async def health() -> JSONResponse:
        """Liveness plus database reachability; 503 "starting" until start-up has finished."""
        if not runtime.ready:
            return JSONResponse({"status": "starting"}, status_code=503)
        try:
            async with runtime.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception:
            log.exception("health check: database unreachable")
            return JSONResponse(
                {"status": "unavailable", "database": "unreachable"}, status_code=503
            )
        return JSONResponse({"status": "ok", "database": "ok"})

    api.include_router(tasks.router)
    api.include_router(workflows.router)
    api.include_router(sessions.router)
    api.include_router(clarifications.router)
    api.include_router(agent.router)
    api.include_router(events.router)
    if runtime.settings.test_api:
        api.include_router(testing.router)
    return api
