"""``python -m backend.serve``: the HTTP API alone, without the Reflex UI.

For QA suites and crash tests that need a backend process they can kill and start again on the
same database; the product itself runs the same API inside the Reflex app (``scripts/run``).
Start-up recovery runs before the port accepts work (``/api/v1/health`` says when).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastapi import FastAPI

from backend.api.app import create_api
from backend.db.engine import get_engine
from backend.heap import settle_for_serving
from backend.runtime import Runtime


def build_app() -> FastAPI:
    runtime = Runtime(get_engine(), owns_engine=True, lock_process=True)
    api = create_api(runtime)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with runtime.lifespan():
            settle_for_serving()
            yield

    api.router.lifespan_context = lifespan
    return api


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.serve")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    uvicorn.run(build_app(), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
