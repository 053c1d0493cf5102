"""The backend's per-process runtime: its engine, its projection epoch, and readiness.

Start-up work (today: allocating the projection epoch; later: reservation and delivery-intent
recovery) runs in :meth:`Runtime.lifespan` before any work is admitted. ``ready`` stays false
until it completes, so ``/api/v1/health`` answers 503 "starting" meanwhile, and a failure
propagates so the server does not start half-recovered.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncEngine

from backend.projections.revision import RevisionClock

log = logging.getLogger(__name__)


class RuntimeNotReadyError(RuntimeError):
    """Work was asked of the backend before start-up finished."""


class Runtime:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._revisions: RevisionClock | None = None

    @property
    def ready(self) -> bool:
        return self._revisions is not None

    @property
    def revisions(self) -> RevisionClock:
        if self._revisions is None:
            raise RuntimeNotReadyError("the backend has not finished starting")
        return self._revisions

    async def start(self) -> None:
        clock = await RevisionClock.start(self.engine)
        log.info("backend started with projection epoch %s", clock.epoch)
        self._revisions = clock

    async def stop(self) -> None:
        self._revisions = None
        await self.engine.dispose()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """For ``app.register_lifespan_task``: start before serving, stop after."""
        await self.start()
        try:
            yield
        finally:
            await self.stop()
