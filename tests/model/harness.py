"""Harness of the lifecycle model test: the fake agent, crashable engines, controllable clocks
and quiescence detection. The test (``test_lifecycle_model.py``) plays the agent and the user.

Nothing here sleeps to order events: interleavings come from fault-point holds, a held agent
dispatch and controllable timers (the responder's confirmation wait, the watchdog's delay),
each released by a rule. ``settle`` only waits until nothing can move on its own any more.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from backend import failpoints
from backend.db.engine import create_engine
from backend.orchestrator.dispatch import (
    PromptNotAcknowledged,
    PromptRejected,
    PromptRequest,
    PromptTransportError,
)
from backend.orchestrator.service import PromptDispatcher


class BackendCrashed(Exception):
    """Raised for every statement of a crashed runtime's engine (as after a kill)."""


class InjectedDbError(Exception):
    """A one-shot database failure injected by a rule."""


# -- the database ---------------------------------------------------------------------------


class EngineGuard:
    """Per-runtime engine wrapper: counts statements (for quiescence), refuses everything once
    ``crashed`` (a zombie task of a killed process can no longer write, nor commit), and fails
    the next statement matching an armed one-shot fault."""

    def __init__(self, url: str) -> None:
        self.engine: AsyncEngine = create_engine(url)
        self.crashed = False
        self.statements = 0
        #: (SQL prefix, text that must occur in the parameters) of the next statement to fail.
        self.fail_next: tuple[str, str] | None = None
        sync = self.engine.sync_engine
        event.listen(sync, "before_cursor_execute", self._before)
        event.listen(sync, "commit", self._commit)

    def _before(self, _conn: Any, _cursor: Any, statement: str, params: Any, *_: Any) -> None:
        self.statements += 1
        if self.crashed:
            raise BackendCrashed("the backend process is gone")
        if self.fail_next is not None:
            prefix, needle = self.fail_next
            if statement.lstrip().upper().startswith(prefix) and needle in repr(params):
                self.fail_next = None
                raise InjectedDbError(f"injected failure of {prefix}")

    def _commit(self, _conn: Any) -> None:
        if self.crashed:
            raise BackendCrashed("the backend process is gone (no commit)")

    def busy(self) -> int:
        return self.engine.sync_engine.pool.checkedout()  # type: ignore[attr-defined]


# -- the agent ------------------------------------------------------------------------------


@dataclass
class AgentTurn:
    """A prompt the agent accepted: it runs this turn until it sends its ready event."""

    session_id: str
    turn_id: str
    generation: int
    answer_pending_id: str | None
    #: The agent still runs it: it has sent no ready event and no callback was refused.
    open: bool = True
    #: It may still ask or talk; after a detached/cancelled/expired wait it only completes.
    talking: bool = True

    def __repr__(self) -> str:
        return f"turn {self.turn_id[-6:]} gen {self.generation}"


@dataclass
class HeldDispatch:
    request: PromptRequest
    outcome: asyncio.Future[str]


class FakeAgent:
    """The agent executor (a stand-in that survives backend restarts). Its record of
    accepted prompts plus the answers live waiters returned is the at-most-once oracle."""

    def __init__(self) -> None:
        self.accepted: list[PromptRequest] = []
        self.turns: list[AgentTurn] = []
        self.faults: list[str] = []  # for the next dispatches: reject/timeout/accept_then_fail/hold
        self.held: HeldDispatch | None = None
        self.received: Counter[str] = Counter()  # pending_id -> times the agent got the answer
        self.receipts: list[str] = []

    def accept(self, request: PromptRequest) -> None:
        self.accepted.append(request)
        pid = (request.answer or {}).get("pending_id")
        if pid is not None:
            self.received[pid] += 1
            self.receipts.append(f"prompt {request.turn_id[-6:]} carries answer {pid[-6:]}")
        self.turns.append(
            AgentTurn(request.session_id, request.turn_id, request.prompt_generation, pid)
        )

    def got_live_answer(self, pending_id: str) -> None:
        self.received[pending_id] += 1
        self.receipts.append(f"live waiter returned answer {pending_id[-6:]}")

    def outcome_of(self, action: str | None, request: PromptRequest) -> None:
        if action == "reject":
            raise PromptRejected()
        if action == "timeout":
            raise PromptNotAcknowledged("no acknowledgement", maybe_delivered=True)
        self.accept(request)
        if action == "accept_then_fail":
            raise PromptTransportError("connection dropped after the prompt was sent")


class AgentLink(PromptDispatcher):
    """One runtime's connection to the agent; dead once that runtime crashed."""

    def __init__(self, agent: FakeAgent) -> None:
        self.agent = agent
        self.dead = False

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:
        if self.dead:
            raise PromptNotAcknowledged("backend process is gone", maybe_delivered=False)
        action = self.agent.faults.pop(0) if self.agent.faults else None
        if action == "hold":
            held = HeldDispatch(prompt, asyncio.get_running_loop().create_future())
            self.agent.held = held
            try:
                action = await held.outcome
            finally:
                if self.agent.held is held:
                    self.agent.held = None
            if self.dead:
                # The process died while the request was on the wire; the harness decided
                # whether the agent got it (``accept`` in the outcome) before the crash.
                raise PromptNotAcknowledged("backend process is gone", maybe_delivered=True)
        self.agent.outcome_of(action, prompt)


# -- controllable timers --------------------------------------------------------------------


class RespondClock:
    """Replaces ``asyncio`` in ``backend.clarifications.respond``: the responder's bounded
    wait for a live confirmation ends when the confirmation arrives or a rule expires it."""

    def __init__(self) -> None:
        self.waits: dict[asyncio.Task[Any], asyncio.Future[None]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def wait_for(self, awaitable: Any, _seconds: float | None) -> Any:
        me = asyncio.current_task()
        assert me is not None
        expire: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        inner = asyncio.ensure_future(awaitable)
        self.waits[me] = expire
        try:
            await asyncio.wait({inner, expire}, return_when=asyncio.FIRST_COMPLETED)
            if inner.done():
                return inner.result()
            raise TimeoutError
        finally:
            self.waits.pop(me, None)
            if not inner.done():
                inner.cancel()

    def blocked(self, task: asyncio.Task[Any]) -> bool:
        return task in self.waits

    def expire(self, task: asyncio.Task[Any]) -> None:
        future = self.waits.get(task)
        if future is not None and not future.done():
            future.set_result(None)


class WatchdogClock:
    """Replaces ``asyncio`` in ``backend.orchestrator.watchdog``: the fallback delay ends
    only when a rule fires the armed watchdogs."""

    def __init__(self) -> None:
        self.sleeping: list[asyncio.Future[None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, _delay: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.sleeping.append(future)
        try:
            await future
        finally:
            with contextlib.suppress(ValueError):
                self.sleeping.remove(future)

    def armed(self) -> int:
        return sum(1 for f in self.sleeping if not f.done())

    def fire(self) -> None:
        for future in list(self.sleeping):
            if not future.done():
                future.set_result(None)


# -- tracked work and quiescence ------------------------------------------------------------


@dataclass
class Tracked:
    """One in-flight call the test started (a user request or an agent callback)."""

    kind: str  # respond / waiter / prompt / ready / message / state / cancel
    task: asyncio.Task[Any]
    info: dict[str, Any] = field(default_factory=dict)
    handled: bool = False
    zombie: bool = False


class Stuck(AssertionError):
    pass


def parked_points() -> dict[str, int]:
    return {name: int(p["waiting"]) for name, p in failpoints.listing().items() if p["waiting"]}


async def settle(guard: EngineGuard, tracked: list[Tracked], timeout_s: float = 30.0) -> None:
    """Wait until nothing moves on its own: no statement in flight or executed, no task
    finished, no fault point reached, over several consecutive polls. Tasks still pending are
    then parked (at a hold, a held dispatch, a controllable timer, a live wait, or a wait
    the backend itself chose)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    last: Any = None
    stable = 0
    while True:
        await asyncio.sleep(0.002)
        hits = tuple(sorted((n, p["hits"], p["waiting"]) for n, p in failpoints.listing().items()))
        signature = (guard.statements, sum(t.task.done() for t in tracked), hits)
        if guard.busy() == 0 and signature == last:
            stable += 1
            if stable >= 5:
                return
        else:
            stable = 0
        last = signature
        if loop.time() > deadline:
            pending = [t.kind for t in tracked if not t.task.done()]
            raise Stuck(f"no quiescence within {timeout_s}s; pending={pending}")
