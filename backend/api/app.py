"""FastAPI application factory.

Later issues add the routers of ``shared/spec/api-contract.md``; every route lives under
``/api/v1`` and errors use one JSON shape without stack traces.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.engine import get_engine

log = logging.getLogger(__name__)


def create_api(engine: AsyncEngine | None = None) -> FastAPI:
    api = FastAPI(
        title="Kandev API",
        version="1",
        openapi_url="/api/v1/openapi.json",
        docs_url="/api/v1/docs",
        redoc_url=None,
    )

    def db() -> AsyncEngine:
        return engine or get_engine()

    @api.get("/api/v1/health")
    async def health() -> JSONResponse:
        try:
            async with db().connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception:
            log.exception("health check: database unreachable")
            return JSONResponse(
                {"status": "unavailable", "database": "unreachable"}, status_code=503
            )
        return JSONResponse({"status": "ok", "database": "ok"})

    return api
