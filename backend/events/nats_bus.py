"""The event bus across workers: every worker publishes to one NATS subject per database, and
every worker's subscribers (WebSockets, tab watchers, the summary projector) hear every event.

Selected by ``KANDEV_NATS_URL`` (``nats-py``, core NATS: at-most-once, like the in-memory bus;
events only announce commits, and clients converge by re-reading). A worker hands its own events
to its own subscribers at once and skips their echo from NATS (each message names its origin),
so a local client never waits on the network. The subject carries the database's
``instance_id`` (``kandev_meta``), so installations sharing a NATS server never hear each other.

No server at start-up fails start-up with a message saying so (never a silent single-worker
run). A connection lost later is re-established by the client; what was published meanwhile is
buffered by it up to its limit, and events lost beyond that are what every client already
tolerates (the next read converges).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import nats
import orjson
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription as NatsSubscription
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.meta import meta_row
from backend.events.bus import QUEUE_LIMIT, Event, InMemoryEventBus, Subscription
from backend.vocabulary import MetaKey
from backend.workers import worker_id

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0


class BusUnavailable(RuntimeError):
    """No NATS server answered at start-up."""


async def serve_subject(
    client: NatsClient, subject: str, handler: Callable[[Msg], Awaitable[None]]
) -> NatsSubscription:
    """Subscribe ``handler`` to ``subject`` and wait until the server has it (a worker
    announces itself only once others can reach it)."""
    subscription = await client.subscribe(subject, cb=handler)
    await client.flush()
    return subscription


async def leave_subject(subscription: NatsSubscription | None) -> None:
    """Unsubscribe, ignoring a connection already gone (stopping must not fail on it)."""
    if subscription is not None:
        with contextlib.suppress(Exception):
            await subscription.unsubscribe()


class WorkerChannel:
    """One worker's end of a request/reply channel between workers: it serves the requests
    sent to its own subject (``kandev.<instance>.<channel>.<worker>``) and sends requests to
    other workers' subjects. Each request is served in its own task: a subscription's
    callbacks run one at a time, and a request may wait long (for a waiter's confirmation, an
    agent's acknowledgement), so the next one must be heard at once. ``handle`` replies."""

    def __init__(
        self, channel: str, handle: Callable[[Msg], Awaitable[None]], worker: str | None = None
    ) -> None:
        self.channel = channel
        self._handle = handle
        #: The worker this end serves; ``None``: this process's, read at each use (a runtime
        #: built before its server forked serves the child's identity).
        self._worker = worker
        self._nc: NatsClient | None = None
        self._instance = ""
        self._subscription: NatsSubscription | None = None
        self._serving: set[asyncio.Task[None]] = set()

    @property
    def worker(self) -> str:
        return self._worker or worker_id()

    @property
    def started(self) -> bool:
        return self._nc is not None

    def subject(self, worker: str) -> str:
        return f"kandev.{self._instance}.{self.channel}.{worker}"

    async def start(self, client: NatsClient, instance_id: str) -> None:
        self._nc, self._instance = client, instance_id
        self._subscription = await serve_subject(client, self.subject(self.worker), self._heard)

    async def stop(self, grace_s: float) -> None:
        """Stop hearing requests; those in flight get ``grace_s`` to reply, then are cut."""
        await leave_subject(self._subscription)
        self._subscription = None
        if self._nc is not None:
            # Until the server has the unsubscription, a sender's request would reach this
            # client, be dropped and time out as "unknown" instead of "nobody serves it".
            with contextlib.suppress(Exception):
                await self._nc.flush()
        if self._serving:
            await asyncio.wait(self._serving, timeout=grace_s)
        for task in self._serving:
            task.cancel()
        self._nc = None

    async def request(self, worker: str, body: bytes, timeout_s: float) -> Msg:
        """Send ``body`` to ``worker``'s end; raises ``NoRespondersError`` when nobody serves
        it (certainly not received), another NATS error or ``TimeoutError`` when unknown."""
        if self._nc is None:
            raise RuntimeError(f"the {self.channel} channel has not started")
        return await self._nc.request(self.subject(worker), body, timeout=timeout_s)

    async def _heard(self, msg: Msg) -> None:
        task = asyncio.ensure_future(self._handle(msg))
        self._serving.add(task)
        task.add_done_callback(self._serving.discard)


def events_subject(instance_id: str) -> str:
    return f"kandev.{instance_id}.events"


class NatsEventBus:
    def __init__(self, url: str, *, queue_limit: int = QUEUE_LIMIT) -> None:
        self.url = url
        #: This worker's subscribers.
        self.local = InMemoryEventBus(queue_limit)
        #: Names this worker in its messages, so it skips its own echo. Drawn when the bus
        #: starts, not when it is built: a bus built before its server forked is one per child.
        self.origin = ""
        self._nc: NatsClient | None = None
        self._subject = ""

    @property
    def client(self) -> NatsClient:
        """The connection (for the other cross-worker channels, once started)."""
        if self._nc is None:
            raise RuntimeError("the NATS bus has not started")
        return self._nc

    async def start(self, instance_id: str) -> None:
        self._subject = events_subject(instance_id)
        self.origin = uuid.uuid4().hex
        try:
            # The client retries a first connection too; start-up must not wait forever.
            async with asyncio.timeout(CONNECT_TIMEOUT_S * 2):
                self._nc = await nats.connect(
                    self.url,
                    name=f"kandev-{self.origin[:8]}",
                    connect_timeout=CONNECT_TIMEOUT_S,
                    max_reconnect_attempts=-1,
                    allow_reconnect=True,
                    error_cb=self._on_error,
                    disconnected_cb=self._on_disconnected,
                    reconnected_cb=self._on_reconnected,
                )
        except Exception as error:
            raise BusUnavailable(
                f"KANDEV_NATS_URL is set, but no NATS server answers at {self.url}: {error!r}"
            ) from error
        await self._nc.subscribe(self._subject, cb=self._heard)
        await self._nc.flush()
        log.info("event bus on NATS at %s (%s)", self.url, self._subject)

    async def close(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            try:
                await self._nc.drain()
            except Exception as error:  # closing anyway
                log.warning("NATS drain failed: %r", error)
        self._nc = None

    async def publish(self, event: Event) -> None:
        self.local.deliver(event)
        body = {"origin": self.origin, "type": event.type, "data": event.data}
        await self.client.publish(self._subject, orjson.dumps(body, default=str))

    @asynccontextmanager
    async def subscribe(self, *, local_only: bool = False) -> AsyncIterator[Subscription]:
        async with self.local.subscribe(local_only=local_only) as queue:
            yield queue

    async def _heard(self, msg: Msg) -> None:
        try:
            body = orjson.loads(msg.data)
            if body["origin"] == self.origin:
                return
            event = Event(str(body["type"]), dict(body["data"]))
        except (ValueError, KeyError, TypeError) as error:
            log.warning("unreadable event on %s dropped: %r", msg.subject, error)
            return
        self.local.deliver(event, from_here=False)

    async def _on_error(self, error: Exception) -> None:
        log.warning("NATS: %r", error)

    async def _on_disconnected(self) -> None:
        if self._nc is None or self._nc.is_draining or self._nc.is_closed:
            return  # our own close (drain), not a lost connection
        log.warning("NATS connection lost; reconnecting")

    async def _on_reconnected(self) -> None:
        log.info("NATS connection re-established")


async def instance_id(engine: AsyncEngine) -> str:
    """The database's name on shared infrastructure (migration 0005)."""
    row = await meta_row(engine, MetaKey.INSTANCE_ID)
    value = row[1] if row is not None else None
    if not value:
        raise RuntimeError("the database has no instance id; run the migrations first")
    return str(value)
