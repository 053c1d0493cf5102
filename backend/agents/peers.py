"""One agent process per session, whichever worker runs the session's next turn.

With several workers, a session's next prompt may be admitted on a worker other than the one
whose agent ran its previous turn (an answer to a detached question is resumed by whichever
worker received it). That worker starts its own agent, which loads the conversation by the
stored ACP session id; the first agent would otherwise sit idle beside it until its worker
stops, or run a superseded turn to its end. So a worker about to launch a session's agent says
so on ``kandev.<instance>.agents.launching``, and every other worker ends its own agent of that
session (its running prompt is cancelled first, as for a newer turn in the same process).

Best effort by design: the message is not acknowledged, and the database stays the judge of
which turn is current (a superseded agent's late output is refused by the generation checks
whatever happens here); this only keeps processes from piling up.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import orjson
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from backend.events.nats_bus import leave_subject, serve_subject
from backend.workers import worker_id

log = logging.getLogger(__name__)


def launching_subject(instance_id: str) -> str:
    return f"kandev.{instance_id}.agents.launching"


class AgentPeers:
    """This worker's end: it announces its launches and ends its agents others replaced."""

    def __init__(self, release: Callable[[str], Awaitable[None]]) -> None:
        #: Ends this worker's agent of a session (a no-op without one).
        self.release = release
        self._nc: NatsClient | None = None
        self._subject = ""
        self._subscription: Subscription | None = None

    async def start(self, client: NatsClient, instance_id: str) -> None:
        self._nc, self._subject = client, launching_subject(instance_id)
        self._subscription = await serve_subject(client, self._subject, self._heard)

    async def stop(self) -> None:
        await leave_subject(self._subscription)
        self._subscription = None
        self._nc = None

    async def launching(self, session_id: str) -> None:
        """Tell the other workers this one starts ``session_id``'s agent (never raises: a lost
        announcement leaves an idle process, not a wrong answer)."""
        if self._nc is None:
            return
        body = orjson.dumps({"session_id": session_id, "worker": worker_id()})
        try:
            await self._nc.publish(self._subject, body)
        except Exception as error:
            log.warning("launch of session %s's agent not announced: %r", session_id, error)

    async def _heard(self, msg: Msg) -> None:
        try:
            body = orjson.loads(msg.data)
            session_id, worker = str(body["session_id"]), str(body["worker"])
        except (ValueError, KeyError, TypeError) as error:
            log.warning("unreadable agent launch notice dropped: %r", error)
            return
        if worker == worker_id():
            return
        try:
            await self.release(session_id)
        except Exception as error:
            log.warning("agent of session %s not ended after its move: %r", session_id, error)
