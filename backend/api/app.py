"""FastAPI application factory.

Later issues add the routers of ``shared/spec/api-contract.md``; every route lives under
``/api/v1`` and errors use one JSON shape without stack traces.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import text

from backend.runtime import Runtime

log = logging.getLogger(__name__)


def create_api(runtime: Runtime) -> FastAPI:
    api = FastAPI(
        title="Kandev API",
        version="1",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )

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

    return api
