"""Handing a response to a live waiter that another worker holds (several workers on NATS).

An agent's open request (a clarification tool call, a permission request) is held by the
worker that received it; the bundle's rows name that worker (``worker`` in their metadata).
A response may reach any worker. The responding worker claims the bundle in the database as
always, then, if the waiter is not its own, asks the owner over NATS request/reply on the
owner's subject (``kandev.<instance>.waiter.<kind>.<worker>``) to hand the claim to its waiter.
The owner resolves its local waiter exactly as a local responder would, waits (bounded) for
the waiter's durable confirmation, and replies with what happened:

- ``absent``: no waiter here any more (it ended meanwhile), nothing was handed over, so the
  responder falls back to detached delivery with the same claim (as after a local miss);
- ``confirmed``: the waiter retired the claim durably, the agent has the answer;
- ``unconfirmed``: handed over, not confirmed in time.

No responder on the subject (the owner died) is ``absent`` too: nobody received the claim.
A timeout, a lost reply or a dropped connection after sending is *unknown*, so the responder
treats it as ``unconfirmed``: it releases the claim with the intent-keyed compare-and-set, and
exactly one of that release and the waiter's confirmation wins (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError

from backend.clarifications.waiters import WaiterOutcome, WaiterRegistry
from backend.db.bounded import bounded
from backend.events.nats_bus import WorkerChannel

log = logging.getLogger(__name__)

ABSENT = "absent"
CONFIRMED = "confirmed"
UNCONFIRMED = "unconfirmed"


class RemoteWaiters:
    """This worker's end of the hand-over for one kind of waiter (``clarification`` or
    ``permission``): it serves hand-overs to its own ``waiters`` and sends them to others."""

    def __init__(
        self,
        waiters: WaiterRegistry,
        kind: str,
        confirm_wait_s: float,
        worker: str | None = None,
    ) -> None:
        self.waiters = waiters
        self.kind = kind
        #: How long a hand-over waits for the waiter's durable confirmation.
        self.confirm_wait_s = confirm_wait_s
        self._channel = WorkerChannel(f"waiter.{kind}", self._serve, worker)

    @property
    def worker(self) -> str:
        return self._channel.worker

    @property
    def started(self) -> bool:
        return self._channel.started

    async def start(self, client: NatsClient, instance_id: str) -> None:
        await self._channel.start(client, instance_id)

    async def stop(self) -> None:
        """Stop taking hand-overs; those in flight end with their waiters (bounded)."""
        await self._channel.stop(self.confirm_wait_s + 1)

    async def hand_over(self, owner: str, pending_id: str, outcome: WaiterOutcome) -> str:
        """Ask ``owner`` to hand ``outcome`` (without its confirmation future) to its waiter;
        returns :data:`ABSENT`, :data:`CONFIRMED` or :data:`UNCONFIRMED`."""
        if not self._channel.started:
            return ABSENT
        body = {
            "pending_id": pending_id,
            "outcome": outcome.outcome,
            "answers": list(outcome.answers),
            "intent_id": outcome.intent_id,
        }
        try:
            reply = await self._channel.request(
                owner, orjson.dumps(body, default=str), self.confirm_wait_s + 1
            )
        except NoRespondersError:
            return ABSENT  # nobody holds that subject: the owner is gone, nothing was sent
        except (NatsError, TimeoutError) as error:
            log.warning("hand-over of %s to worker %s unanswered: %r", pending_id, owner, error)
            return UNCONFIRMED  # it may have been taken: only the compare-and-set can tell
        try:
            result = str(orjson.loads(reply.data)["result"])
        except (ValueError, KeyError, TypeError):
            return UNCONFIRMED
        return result if result in (ABSENT, CONFIRMED) else UNCONFIRMED

    async def deliver(
        self, owner: str, pending_id: str, outcome: WaiterOutcome
    ) -> tuple[str, asyncio.CancelledError | None]:
        """:meth:`hand_over` for a responder holding a claim: the caller's cancellation cannot
        cut it short (it waits, shielded and bounded, and gets its ``CancelledError`` back with
        the outcome :data:`UNCONFIRMED`), and any failure counts as :data:`UNCONFIRMED`, so the
        claim is always settled by the intent-keyed compare-and-set, never stranded."""
        try:
            return await bounded(
                self.hand_over(owner, pending_id, outcome), self.confirm_wait_s + 3
            ), None
        except asyncio.CancelledError as error:
            return UNCONFIRMED, error
        except Exception as error:
            log.warning("hand-over of %s to worker %s failed: %r", pending_id, owner, error)
            return UNCONFIRMED, None

    async def _serve(self, msg: Msg) -> None:
        try:
            body: dict[str, Any] = orjson.loads(msg.data)
            pending_id = str(body["pending_id"])
            confirmation: asyncio.Future[list[dict[str, Any]]] = (
                asyncio.get_running_loop().create_future()
            )
            outcome = WaiterOutcome(
                str(body["outcome"]),
                tuple(body.get("answers") or ()),
                intent_id=str(body["intent_id"]),
                confirmation=confirmation,
            )
        except (ValueError, KeyError, TypeError) as error:
            log.warning("unreadable hand-over on %s dropped: %r", msg.subject, error)
            return
        result = ABSENT
        if self.waiters.resolve(pending_id, outcome):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(confirmation), self.confirm_wait_s)
            confirmed = (
                confirmation.done()
                and not confirmation.cancelled()
                and confirmation.exception() is None
                and bool(confirmation.result())
            )
            result = CONFIRMED if confirmed else UNCONFIRMED
        try:
            await msg.respond(orjson.dumps({"result": result}))
        except Exception as error:  # the responder then settles by compare-and-set
            log.warning("hand-over reply for %s lost: %r", pending_id, error)
