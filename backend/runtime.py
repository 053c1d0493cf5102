"""The backend's per-process runtime: engine, event bus, waiters, orchestrator, readiness.

Start-up work (crash recovery, then the projection epoch and the summary projector) runs in
:meth:`Runtime.lifespan` before any work is admitted. ``ready`` stays false until it completes,
so ``/api/v1/health`` answers 503 "starting" meanwhile, and a failure propagates so the server
does not start half-recovered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.agent_credentials import AgentCredentials
from backend.agent_tools import AgentTools
from backend.agents.acp_executor import AcpExecutor
from backend.agents.profiles import load_profiles
from backend.agents.routing import AgentRouter
from backend.clarifications.handover import RemoteWaiters
from backend.clarifications.respond import LIVE_CONFIRM_WAIT_S, Responder
from backend.clarifications.store import detach_orphans
from backend.clarifications.waiters import WaiterRegistry
from backend.config import Settings, get_settings
from backend.db.bounded import drain
from backend.db.engine import write_tx
from backend.errors import DomainError
from backend.events import EventBus, InMemoryEventBus
from backend.events.nats_bus import NatsEventBus, instance_id
from backend.events.publisher import EventPublisher
from backend.orchestrator.dispatch import AgentChannel
from backend.orchestrator.service import Orchestrator, PromptDispatcher
from backend.permissions import PermissionDesk
from backend.projections.revision import RevisionClock, start_clock
from backend.projections.summaries import TaskSummaries
from backend.projections.summary_projector import SummaryProjector
from backend.recovery import recover
from backend.workers import DeadOwners, PresenceLost, SingleProcessLock, WorkerPresence

log = logging.getLogger(__name__)

#: A worker's exit status once it lost its advisory lock (``EX_TEMPFAIL``: start another).
EXIT_PRESENCE_LOST = 75
#: The name of a worker's heartbeat-and-sweep task (its statements run forever, idle or not).
UPKEEP_TASK = "worker-upkeep"


def stop_process(lost: PresenceLost) -> None:
    """Fail-stop: the other workers now take this one for dead and its work for theirs, so it
    ends at once, as a crash would (no shutdown step may detach, pause or answer what they
    take over); the supervisor (Granian) starts a new worker, and its agents die with it
    (``backend/agents/lifeline.py``)."""
    log.critical("stopping this worker: %s; the other workers take its work over", lost)
    logging.shutdown()
    os._exit(EXIT_PRESENCE_LOST)


class RuntimeNotReadyError(DomainError):
    """Work was asked of the backend before start-up finished."""

    status = 503
    code = "starting"


class Runtime:
    def __init__(
        self,
        engine: AsyncEngine,
        settings: Settings | None = None,
        *,
        dispatcher: PromptDispatcher | None = None,
        bus: EventBus | None = None,
        owns_engine: bool = False,
        lock_process: bool = False,
        on_presence_lost: Callable[[PresenceLost], None] | None = None,
    ) -> None:
        """``lock_process``: this runtime is its process's server (``backend.serve``, the app),
        so on SQLite it refuses to start while another process serves the same file.
        ``on_presence_lost``: what a worker does once it lost its advisory lock (default: the
        process stops at once, :func:`stop_process`); a test's in-process runtime records it."""
        settings = settings or get_settings()
        self._on_presence_lost = on_presence_lost or stop_process
        self.engine = engine
        self._owns_engine = owns_engine
        self.settings = settings
        #: Several workers serve this database (PostgreSQL + NATS): see ``backend/workers.py``.
        self.multi_worker = bool(settings.nats_url)
        if self.multi_worker and engine.dialect.name != "postgresql":
            raise ValueError("several workers (KANDEV_NATS_URL) need PostgreSQL")
        self.presence: WorkerPresence | SingleProcessLock | None = None
        if self.multi_worker:
            self.presence = WorkerPresence(engine)
        elif lock_process and engine.dialect.name == "sqlite":
            self.presence = SingleProcessLock(engine)
        if bus is None:
            bus = NatsEventBus(settings.nats_url) if settings.nats_url else InMemoryEventBus()
        self.bus: EventBus = bus
        self.waiters = WaiterRegistry()
        self.events = EventPublisher(engine, self.bus, lambda: self.revisions)
        self.summaries = TaskSummaries(engine, self.bus)
        self.projector = SummaryProjector(engine, self.bus, self.summaries)
        #: The agent profiles sessions may name (a session's own profile runs its agent).
        self.profiles = load_profiles(settings.agent_profiles, mock_record=settings.mock_record)
        if settings.agent not in self.profiles:
            known = ", ".join(sorted(self.profiles))
            raise ValueError(f"unknown agent profile {settings.agent!r} (known: {known})")
        self._owned_executor: AcpExecutor | None = None
        #: Several workers: each session's prompts go to the worker running its agent.
        self.router: AgentRouter | None = None
        if dispatcher is None:
            self._owned_executor = AcpExecutor(
                self.profiles, start_timeout_s=settings.agentctl_ack_timeout_s
            )
            dispatcher = self._owned_executor
            if self.multi_worker:
                # The owner's dispatch may wait for a launch, then for the acknowledgement.
                forward_s = 2 * settings.agentctl_ack_timeout_s + 1
                self.router = AgentRouter(dispatcher, engine, forward_timeout_s=forward_s)
                dispatcher = self.router
        #: Read at start (before recovery, which may resume answers to agents).
        self.credentials = AgentCredentials()
        self.orchestrator = Orchestrator(
            engine,
            dispatcher,
            self.events,
            self.waiters,
            channel=AgentChannel(settings.public_url, self.credentials),
            watchdog_delay_s=settings.primary_answer_watchdog_s,
            ack_timeout_s=settings.agentctl_ack_timeout_s,
        )
        if isinstance(dispatcher, PromptDispatcher):
            dispatcher.attach(self.orchestrator)
        #: The MCP tools agents call (``ask_user_clarification``); mounted by the API.
        self.agent_tools = AgentTools(engine, self.orchestrator, self.credentials)
        #: Answers handed to the agents' waits held by other workers (started on NATS only).
        self.handover = RemoteWaiters(self.waiters, "clarification", LIVE_CONFIRM_WAIT_S)
        self.responder = Responder(
            engine, self.waiters, self.orchestrator, self.events, self.summaries, self.handover
        )
        #: Agents' permission requests, answerable by the user (``backend/permissions``).
        self.permissions = PermissionDesk(engine, self.events, self.summaries)
        executor = self.router.local if self.router is not None else dispatcher
        if isinstance(executor, AcpExecutor):
            executor.attach_permissions(self.permissions)
        self._revisions: RevisionClock | None = None
        #: Several workers: the loop settling dead workers' leftovers (``backend/workers.py``).
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def ready(self) -> bool:
        return self._revisions is not None

    @property
    def revisions(self) -> RevisionClock:
        if self._revisions is None:
            raise RuntimeNotReadyError("the backend has not finished starting")
        return self._revisions

    @property
    def agent_control(self) -> AcpExecutor | None:
        """The executor's test controls (the mock's fault point and prompt record)."""
        dispatcher = self.orchestrator.dispatcher
        if isinstance(dispatcher, AgentRouter):
            dispatcher = dispatcher.local
        return dispatcher if isinstance(dispatcher, AcpExecutor) else None

    async def start(self) -> None:
        """Recover every crash window, then allocate the projection epoch; only then is the
        runtime ready (a failure propagates and the server does not start)."""
        failpoints.load_from_env()
        if self.presence is not None:
            await self.presence.start()
        try:
            if isinstance(self.bus, NatsEventBus):
                instance = await instance_id(self.engine)
                await self.bus.start(instance)
                await self.handover.start(self.bus.client, instance)
                await self.permissions.remote.start(self.bus.client, instance)
                if self.router is not None:
                    await self.router.start(self.bus.client, instance)
        except BaseException:
            await self._stop_handovers()
            await self._close_bus()
            await self._leave()
            raise
        # The summary projector subscribes first so it hears start-up replay (the events only
        # name tasks whose summaries it re-derives): a cache repairer, not admitted work.
        await self.projector.start()
        try:
            await self.credentials.load(self.engine)
            await self._recover()
            clock = await start_clock(self.engine)
            await self.agent_tools.start()
        except BaseException:
            await self.projector.stop()
            await self._stop_handovers()
            await self._close_bus()
            await self._leave()
            raise
        log.info("backend started with projection epoch %s", clock.epoch)
        self._revisions = clock
        if isinstance(self.presence, WorkerPresence):
            self._sweeper = asyncio.create_task(
                self._sweep_forever(self.presence), name=UPKEEP_TASK
            )

    async def stop(self) -> None:
        self._revisions = None
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await self.agent_tools.stop()  # open tool calls end here: their bundles detach
        await self.permissions.close()  # open permission requests end: cancelled
        # Durable work shielded from cancelled requests (detach, pause, rollback, release)
        # finishes before the engine goes away.
        await drain()
        await self._stop_handovers()  # after the waits ended: hand-overs in flight are done
        await self.projector.stop()
        await self.orchestrator.watchdog.shutdown()
        if self._owned_executor is not None:
            await self._owned_executor.aclose()
        await self._close_bus()
        await self._leave()
        if self._owns_engine:
            await self.engine.dispose()

    async def _recover(self) -> None:
        """Settle crash leftovers: all of them with one process per database; with several
        workers, one worker at a time and only those of workers that are gone."""
        if isinstance(self.presence, WorkerPresence):
            async with self.presence.exclusive_recovery():
                await recover(self.engine, self.bus, await self.presence.dead_filter())
        else:
            await recover(self.engine, self.bus)

    async def _sweep_forever(self, presence: WorkerPresence) -> None:
        """Check every ``worker_heartbeat_s`` that this worker still holds its lock (fail-stop
        if not), and every ``worker_sweep_s`` settle the leftovers of workers that died while
        this one serves: the start-up recovery, for workers gone at two sweeps in a row,
        whenever no worker holds the recovery lock. A failed sweep is logged; the next one
        tries again."""
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + self.settings.worker_sweep_s
        while True:
            await asyncio.sleep(min(self.settings.worker_heartbeat_s, self.settings.worker_sweep_s))
            try:
                await presence.verify()
            except PresenceLost as lost:
                self._on_presence_lost(lost)
                return
            if loop.time() < next_sweep:
                continue
            next_sweep = loop.time() + self.settings.worker_sweep_s
            try:
                async with presence.recovery_if_free() as mine:
                    if mine:
                        owners = await presence.sweep_filter()
                        await recover(self.engine, self.bus, owners)
                        await self._detach_orphaned_questions(owners)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                log.warning("sweep of dead workers' work failed (retried): %r", error)
                with contextlib.suppress(Exception):
                    await presence.reset()

    async def _detach_orphaned_questions(self, owners: DeadOwners) -> None:
        """A dead worker's questions are detached exactly as after their agent disconnected,
        and announced, so clients of the live workers see them answerable as detached now,
        not at their next read. (Start-up recovery leaves this to the rule: no client of the
        starting process can hold an older view.)"""
        async with write_tx(self.engine) as conn:
            rows = await detach_orphans(conn, owners)
        for row in rows:
            # Committed already: a lost announcement only delays clients to their next read.
            try:
                await self.events.message("session.message.updated", row)
            except Exception as error:
                log.warning("detached question %s not announced: %r", row["id"], error)

    async def _leave(self) -> None:
        if self.presence is not None:
            await self.presence.stop()

    async def _stop_handovers(self) -> None:
        if self.router is not None:
            await self.router.stop()
        await self.handover.stop()
        await self.permissions.remote.stop()

    async def _close_bus(self) -> None:
        if isinstance(self.bus, NatsEventBus):
            await self.bus.close()

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """For ``app.register_lifespan_task``: start before serving, stop after."""
        await self.start()
        try:
            yield
        finally:
            await self.stop()
