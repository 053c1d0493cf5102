"""Every prompt of a session reaches the one agent process of that session, whichever worker
admitted it (several workers on PostgreSQL + NATS).

A session's agent is a child process of the worker that started it: its conversation, its
running turn and its open tool calls live there. A prompt admitted on another worker (a new
turn, a detached answer's resume) must not start a second agent for the session; it is sent to
the worker running the first one, which dispatches it to its agent exactly as a local prompt.

Who runs it is durable: ``task_sessions.agent_worker`` (migration 0007). Whether that worker
still lives is the database's answer too, its advisory lock (``backend/workers.py``). So:

- the session names this worker, or nobody: dispatched here (a nobody is claimed first, by a
  compare-and-set, so two workers dispatching a new session's first prompts at once agree);
- it names a live worker: the prompt goes to it by NATS request/reply on that worker's
  subject (``kandev.<instance>.agent.<worker>``); the reply says what the agent did, in the
  executor's own terms (acknowledged; rejected or not acknowledged, so certainly not taken;
  or maybe delivered);
- it names a worker that no longer lives (no responder, and its lock is gone): this worker
  takes the session over by compare-and-set and starts the agent (``session/load`` resumes
  the conversation where the agent supports it). The loser of a race to take it over sends
  the prompt to the winner.

A request with no reply in time, or a reply lost, is *maybe delivered* (the owner may have
written the prompt to its agent): the orchestrator treats it as a transport failure after
the send, never as a prompt that was not taken. A live owner that does not answer on NATS
(its connection is being re-established) is *not acknowledged*: nothing was sent, retry.

Ownership never leaves a live worker. One known edge is left alone: a worker whose database
connection drops while its process lives loses its lock, so another worker takes its sessions
over and starts second agents for them; the first worker's agents then get no more prompts.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import orjson
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import NoRespondersError
from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.engine import read_tx, write_tx
from backend.db.tables import sessions
from backend.events.nats_bus import WorkerChannel
from backend.orchestrator.dispatch import (
    AgentSink,
    PromptDispatcher,
    PromptDispatchError,
    PromptNotAcknowledged,
    PromptRejected,
    PromptRequest,
    PromptTransportError,
)
from backend.workers import live_workers

log = logging.getLogger(__name__)

T = TypeVar("T")

ACKNOWLEDGED = "acknowledged"
REJECTED = "rejected"
NOT_ACKNOWLEDGED = "not_acknowledged"
MAYBE_DELIVERED = "maybe_delivered"

#: How many owners a prompt may meet before it gives up (each one a lost take-over race).
MAX_HOPS = 3

_PROMPT_FIELDS = frozenset(field.name for field in dataclasses.fields(PromptRequest))

_TAKE_OVER_FROM_NOBODY = (
    update(sessions)
    .where(sessions.c.id == bindparam("session_id"), sessions.c.agent_worker.is_(None))
    .values(agent_worker=bindparam("me"))
    .returning(sessions.c.id)
)
_TAKE_OVER_FROM = (
    update(sessions)
    .where(
        sessions.c.id == bindparam("session_id"),
        sessions.c.agent_worker == bindparam("seen"),
    )
    .values(agent_worker=bindparam("me"))
    .returning(sessions.c.id)
)
_OWNER = select(sessions.c.agent_worker).where(sessions.c.id == bindparam("session_id"))


class _OwnerGone(Exception):
    """Nobody serves the owner's subject: the prompt was certainly not sent."""


class AgentRouter(PromptDispatcher):
    """Dispatches to ``local`` (this worker's executor) the prompts of the sessions whose agent
    runs here, and sends the others to their agent's worker; serves that worker's end too."""

    def __init__(
        self,
        local: PromptDispatcher,
        engine: AsyncEngine,
        *,
        forward_timeout_s: float,
        worker: str | None = None,
    ) -> None:
        self.local = local
        self.engine = engine
        #: How long a sent prompt waits for the owner's reply (its agent's acknowledgement,
        #: a launch included); past it the prompt may have been delivered.
        self.forward_timeout_s = forward_timeout_s
        self._channel = WorkerChannel("agent", self._serve, worker)

    @property
    def worker(self) -> str:
        return self._channel.worker

    def attach(self, sink: AgentSink) -> None:
        self.local.attach(sink)

    async def start(self, client: NatsClient, instance_id: str) -> None:
        await self._channel.start(client, instance_id)

    async def stop(self) -> None:
        """Stop taking other workers' prompts; those in flight get their acknowledgement."""
        await self._channel.stop(self.forward_timeout_s)

    # -- sending -------------------------------------------------------------------------------

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:
        if not self._channel.started:  # one process: every agent is here
            await self.local.dispatch_prompt(prompt)
            return
        owner = prompt.agent_worker
        for _ in range(MAX_HOPS):
            if owner == self.worker:
                await self.local.dispatch_prompt(prompt)
                return
            if owner is not None:
                try:
                    await self._forward(owner, prompt)
                    return
                except _OwnerGone:
                    if await self._unsent(self._lives(owner)):
                        raise PromptNotAcknowledged(
                            "the worker running this session's agent does not answer; "
                            "try again in a moment",
                            maybe_delivered=False,
                        ) from None
            owner = await self._unsent(self._take_over(prompt.session_id, owner))
        raise PromptNotAcknowledged(
            "the session's agent moved between workers while the prompt was sent; try again",
            maybe_delivered=False,
        )

    @staticmethod
    async def _unsent(step: Awaitable[T]) -> T:
        """A lookup before anything was sent: its failure means the prompt was not taken."""
        try:
            return await step
        except PromptRejected:
            raise
        except Exception as error:
            log.warning("finding the worker running an agent failed: %r", error)
            raise PromptNotAcknowledged(
                "the worker running this session's agent could not be found; try again",
                maybe_delivered=False,
            ) from error

    async def _take_over(self, session_id: str, seen: str | None) -> str | None:
        """Name this worker as the session's agent's unless someone else took it since ``seen``
        was read; returns the owner now (this worker when taken)."""
        params = {"session_id": session_id, "me": self.worker, "seen": seen}
        statement = _TAKE_OVER_FROM_NOBODY if seen is None else _TAKE_OVER_FROM
        async with write_tx(self.engine) as conn:
            if (await conn.execute(statement, params)).first() is not None:
                if seen is not None:
                    log.info("session %s: agent taken over from worker %s", session_id, seen)
                return self.worker
            row = (await conn.execute(_OWNER, params)).first()
        if row is None:
            raise PromptRejected("the session is gone")
        return row.agent_worker

    async def _lives(self, worker: str) -> bool:
        async with read_tx(self.engine) as conn:
            return worker in await live_workers(conn)

    async def _forward(self, owner: str, prompt: PromptRequest) -> None:
        body = orjson.dumps(dataclasses.asdict(prompt), default=str)
        try:
            reply = await self._channel.request(owner, body, self.forward_timeout_s)
        except NoRespondersError:
            raise _OwnerGone from None
        except (NatsError, TimeoutError) as error:
            raise PromptTransportError(
                f"no reply from the worker running this session's agent: {error!r}"
            ) from error
        try:
            answer = orjson.loads(reply.data)
            result, message = str(answer["result"]), str(answer.get("message") or "")
        except (ValueError, KeyError, TypeError) as error:
            raise PromptTransportError("an unreadable reply from the agent's worker") from error
        if result == ACKNOWLEDGED:
            return
        if result == REJECTED:
            raise PromptRejected(message)
        if result == NOT_ACKNOWLEDGED:
            raise PromptNotAcknowledged(message, maybe_delivered=False)
        raise PromptTransportError(message or "the agent's worker failed after the send")

    # -- serving -------------------------------------------------------------------------------

    async def _serve(self, msg: Msg) -> None:
        try:
            prompt = _prompt_from(orjson.loads(msg.data))
        except (ValueError, KeyError, TypeError) as error:
            log.warning("unreadable prompt on %s dropped: %r", msg.subject, error)
            return  # no reply: the sender's wait ends as maybe delivered, never as taken
        result, message = ACKNOWLEDGED, ""
        try:
            await self.local.dispatch_prompt(prompt)
        except PromptRejected as error:
            result, message = REJECTED, str(error)
        except PromptDispatchError as error:
            result = MAYBE_DELIVERED if error.maybe_delivered else NOT_ACKNOWLEDGED
            message = str(error)
        except Exception as error:  # anything unexpected: the agent may have the prompt
            log.exception("prompt of session %s for another worker failed", prompt.session_id)
            result, message = MAYBE_DELIVERED, f"the agent's worker failed: {type(error).__name__}"
        try:
            await msg.respond(orjson.dumps({"result": result, "message": message}))
        except Exception as error:  # the sender's wait then ends as maybe delivered
            log.warning("reply for the prompt of session %s lost: %r", prompt.session_id, error)


def _prompt_from(body: Any) -> PromptRequest:
    if not isinstance(body, dict) or not set(body) <= _PROMPT_FIELDS:
        raise ValueError("not a prompt")
    return PromptRequest(**body)
