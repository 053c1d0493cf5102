"""FastAPI application factory: the routes of ``shared/spec/api-contract.md`` under ``/api/v1``.

Errors have one JSON shape, ``{"error": code, "message": text, ...}``; validation failures are
400 (not FastAPI's 422) and unexpected failures are 500 without any internals.
"""

from __future__ import annotations

import contextlib
import logging
from urllib.parse import unquote_to_bytes

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import text
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.agent_tools import MCP_PATH
from backend.api.routes import (
    agent,
    clarifications,
    events,
    permissions,
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


class HandleUnexpectedErrors:
    """Unexpected failures of an HTTP request end here, inside the app: logged with their
    stack trace, answered ``500 {"error": "internal", ...}`` without internals.

    An ``@exception_handler(Exception)`` alone is not enough: Starlette's
    ``ServerErrorMiddleware`` sends its response and then re-raises, so the server logs
    "Exception in ASGI application" and drops the kept-alive connection, and the client's next
    request on it fails. Added with ``add_middleware``, this sits inside that middleware and
    outside the routes' own handlers (domain, validation, HTTP errors), and returns normally.

    If the response has already started it cannot be replaced: a chunked body is ended, and a
    body of declared length is left short for the server to close the connection. Cancellation
    (``BaseException``) propagates; WebSockets pass through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = completed = sized = False

        async def tracked(message: Message) -> None:
            nonlocal started, completed, sized
            if message["type"] == "http.response.start":
                started = True
                sized = any(k.lower() == b"content-length" for k, _ in message.get("headers", ()))
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                completed = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            with contextlib.suppress(Exception):  # the client is gone: nothing left to tell
                if not started:
                    await error(500, "internal", "internal server error")(scope, receive, send)
                elif not completed and not sized:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})


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
    api.add_middleware(HandleUnexpectedErrors)

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
        """Only for a failure outside :class:`HandleUnexpectedErrors` (a middleware added
        later, e.g. Reflex's CORS): same shape, though Starlette then re-raises."""
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
    api.include_router(permissions.router)
    api.include_router(agent.router)
    api.include_router(events.router)
    api.mount(MCP_PATH, runtime.agent_tools.asgi_app)
    if runtime.settings.test_api:
        api.include_router(testing.router)
    return api
