"""The system under test as the model test drives it: one task in "In Progress" with one
session, a runtime that can crash and restart, the fake agent, and the reference model.

Rules (``r_*``) start calls as tasks, then the test settles the system and checks the
invariants (``checks.py``, ``model_checks.py``). Rules draw their own parameters.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import note
from hypothesis import strategies as st
from sqlalchemy import insert, select

from backend import failpoints
from backend.clarifications.answers import Answer
from backend.clarifications.store import Question
from backend.config import Settings
from backend.db.engine import read_tx, write_tx
from backend.events import Event
from backend.ids import new_id
from backend.projections.sessions import project_sessions
from backend.runtime import Runtime
from backend.seed import STEP_TASK_STATES
from backend.vocabulary import SessionState
from tests.api.test_workflow import board
from tests.model.checks import Snapshot, snapshot
from tests.model.harness import (
    AgentLink,
    AgentTurn,
    EngineGuard,
    FakeAgent,
    RespondClock,
    Tracked,
    parked_points,
)
from tests.support.builders import T0

#: Exploration knob: ``KANDEV_MODEL_SKIP=r_restart,agent:hold,resume.before_clear`` leaves
#: those rules, faults or hold points out of the programs (to look past a known failure).
SKIP = frozenset(filter(None, os.environ.get("KANDEV_MODEL_SKIP", "").split(",")))

RESPOND_HOLDS = (
    None,
    "respond.after_claim",
    "waiter.before_confirm",
    "resume.after_reserve",
    "resume.attempt_mark",
    "resume.after_attempt_mark",
    "resume.before_publish",
    "events.publish",
    "resume.before_clear",
)
DETACH_HOLDS = (None, "clarification.before_detach", "clarification.before_pause")
WEIGHTS = {
    "r_ask": 4,
    "r_respond": 6,
    "r_release": 5,
    "r_release_dispatch": 4,
    "r_expire_confirm_wait": 3,
    "r_disconnect": 3,
    "r_cancel_request": 2,
    "r_message": 1,
    "r_set_state": 1,
    "r_restart": 2,
    "r_cancel_live": 1,
    "r_fire_watchdog": 1,
}
FAULTS = (
    "agent:reject",
    "agent:timeout",
    "agent:accept_then_fail",
    "agent:hold",
    "fp:events.publish",
    "fp:resume.attempt_mark",
    "fp:resume.rollback",
    "db:reservation",
)


@dataclass
class BundleModel:
    pending_id: str
    turn_id: str
    message_ids: list[str]
    #: active / terminal / unknown (claimed is derived: a respond on it is in flight).
    state: str = "active"
    outcomes: list[str] = field(default_factory=list)
    agent_told: str | None = None  # what a live waiter returned to the agent

    def __repr__(self) -> str:
        return f"bundle {self.pending_id[-6:]} of turn {self.turn_id[-6:]}"


@dataclass
class Life:
    """One backend process: its engine, runtime, link to the agent and event record."""

    guard: EngineGuard
    runtime: Runtime
    link: AgentLink
    events: list[Event] = field(default_factory=list)
    collector: asyncio.Task[None] | None = None


class System:
    def __init__(self, url: str, draw: Callable[..., Any], clocks: tuple[RespondClock, Any]):
        self.url = url
        self.draw = draw
        self.respond_clock, self.watchdog_clock = clocks
        self.agent = FakeAgent()
        self.tracked: list[Tracked] = []
        self.bundles: dict[str, BundleModel] = {}
        self.lives: list[Life] = []
        self.session_id = ""
        self.task_id = ""
        self.session_terminal = False
        self.post_checks: list[tuple[str, Any]] = []  # verified at the next check
        self.last_read: tuple[int, int] | None = None
        self.events_base = 0  # event index of the last restart (clients re-read there)
        self.steps = 0
        self.restarts = 0

    @property
    def life(self) -> Life:
        return self.lives[-1]

    @property
    def rt(self) -> Runtime:
        return self.life.runtime

    # -- lifecycle ------------------------------------------------------------------------

    async def boot(self) -> None:
        guard = EngineGuard(self.url)
        link = AgentLink(self.agent)
        settings = Settings(
            public_url="http://model.invalid",
            primary_answer_watchdog_s=1.0,  # its delay is the WatchdogClock's, fired by a rule
        )
        runtime = Runtime(guard.engine, settings, dispatcher=link)
        life = Life(guard, runtime, link)
        subscribed = asyncio.Event()

        async def collect() -> None:
            async with runtime.bus.subscribe() as queue:
                subscribed.set()
                while True:
                    life.events.append(await queue.get())

        life.collector = asyncio.create_task(collect())
        await subscribed.wait()
        self.lives.append(life)
        await runtime.start()

    async def setup(self) -> None:
        await self.boot()
        b = await board(self.rt.engine)
        self.task_id = new_id()
        from backend.db.tables import tasks

        async with write_tx(self.rt.engine) as conn:
            await conn.execute(
                insert(tasks).values(
                    id=self.task_id,
                    workspace_id=b.workspace_id,
                    workflow_id=b.workflow_id,
                    workflow_step_id=b.steps["In Progress"],
                    title="model",
                    description="",
                    state=STEP_TASK_STATES[1],
                    created_at=T0,
                    updated_at=T0,
                )
            )
        row, _turn = await self.rt.orchestrator.create_session(self.task_id, "start")
        self.session_id = row["id"]

    def start(self, kind: str, coro: Any, **info: Any) -> Tracked:
        tracked = Tracked(kind, asyncio.ensure_future(coro), info)
        self.tracked.append(tracked)
        return tracked

    def live_tasks(self, kind: str | None = None) -> list[Tracked]:
        return [
            t
            for t in self.tracked
            if not t.zombie and not t.task.done() and (kind is None or t.kind == kind)
        ]

    def responds_on(self, pending_id: str) -> list[Tracked]:
        return [t for t in self.live_tasks("respond") if t.info["pid"] == pending_id]

    async def read(self) -> Snapshot:
        return await snapshot(self.rt.engine, self.session_id, self.task_id)

    async def projection(self) -> tuple[tuple[int, int], str | None]:
        from backend.db.tables import sessions

        result = await project_sessions(
            self.rt.engine, self.rt.revisions, sessions.c.id == self.session_id
        )
        action = result.pending_actions().get(self.session_id)
        rev = (result.revision.epoch, result.revision.sequence)
        return rev, action.value if action is not None else None

    def log(self, text: str) -> None:
        self.steps += 1
        note(f"step {self.steps}: {text}")

    # -- rule parameters ------------------------------------------------------------------

    def agent_turns(self) -> list[AgentTurn]:
        return [t for t in self.agent.turns if t.session_id == self.session_id]

    def talking_turns(self) -> list[AgentTurn]:
        return [t for t in self.agent_turns() if t.open and t.talking]

    def pick_turn(self, label: str, talking: bool = False) -> AgentTurn:
        turns = self.talking_turns() if talking else self.agent_turns()
        newest_first = list(reversed(turns))
        return self.draw(st.sampled_from(newest_first), label=label)

    def pick_bundle(self) -> BundleModel:
        newest_first = list(reversed(self.bundles.values()))
        return self.draw(st.sampled_from(newest_first), label="bundle")

    def free_point(self, options: tuple[str | None, ...], label: str) -> str | None:
        configured = failpoints.listing()
        usable = [p for p in options if p is None or (p not in configured and p not in SKIP)]
        return self.draw(st.sampled_from(usable), label=label)

    # -- rules ----------------------------------------------------------------------------

    def enabled(self) -> list[str]:
        rules = ["r_prompt", "r_ready", "r_fault", "r_restart"]
        if self.talking_turns():
            rules += ["r_ask", "r_message"]
        if self.bundles:
            rules += ["r_respond", "r_cancel_live"]
        if not self.session_terminal:
            rules.append("r_set_state")
        if parked_points():
            rules.append("r_release")
        if self.live_tasks("respond"):
            rules.append("r_cancel_request")
        if any(self.respond_clock.blocked(t.task) for t in self.live_tasks("respond")):
            rules.append("r_expire_confirm_wait")
        if [w for w in self.live_tasks("waiter") if not w.info["gone"].done()]:
            rules.append("r_disconnect")
        if self.live_tasks("waiter"):
            rules.append("r_cancel_waiter")
        if self.agent.held is not None:
            rules.append("r_release_dispatch")
        if self.watchdog_clock.armed():
            rules.append("r_fire_watchdog")
        # Weighted (a rule listed n times is n times as likely): programs should reach
        # bundles, parked responses and releases, not end the session early.
        return [r for r in rules if r not in SKIP for _ in range(WEIGHTS.get(r, 2))]

    async def r_ask(self) -> None:
        turn = self.pick_turn("asking turn", talking=True)
        count = self.draw(st.integers(1, 2), label="questions")
        disconnect = self.draw(st.booleans(), label="disconnect at once")
        hold = self.free_point(DETACH_HOLDS, "detach hold") if disconnect else None
        if hold:
            failpoints.configure(hold, "hold", count=1)
        gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if disconnect:
            gone.set_result(None)
        questions = [Question(f"Q{i}?", ("yes", "no")) for i in range(count)]
        self.log(f"agent asks in turn {turn.turn_id[-6:]} (disconnect={disconnect}, hold={hold})")
        expect = await self.callback_expectation(turn)
        self.start(
            "waiter",
            self.rt.orchestrator.agent_clarification(
                self.session_id, turn.turn_id, turn.generation, questions, 3600, gone
            ),
            turn=turn,
            gone=gone,
            expect_accepted=expect,
            hold=hold,
        )

    async def r_disconnect(self) -> None:
        waiters = [w for w in self.live_tasks("waiter") if not w.info["gone"].done()]
        waiter = self.draw(st.sampled_from(waiters), label="waiter")
        hold = self.free_point(DETACH_HOLDS, "detach hold")
        if hold:
            failpoints.configure(hold, "hold", count=1)
        self.log(f"agent's wait {waiter.info.get('pid', '?')[-6:]} disconnects (hold={hold})")
        waiter.info["gone"].set_result(None)

    async def r_cancel_waiter(self) -> None:
        waiter = self.draw(st.sampled_from(self.live_tasks("waiter")), label="waiter")
        self.log(f"server cancels the agent's wait {waiter.info.get('pid', '?')[-6:]}")
        waiter.task.cancel()

    async def r_respond(self) -> None:
        bundle = self.pick_bundle()
        skip = self.draw(st.booleans(), label="skip")
        hold = self.free_point(RESPOND_HOLDS, "respond hold")
        if hold:
            failpoints.configure(hold, "hold", count=1)
        answers = None if skip else [Answer(mid, ("o1",), "") for mid in bundle.message_ids]
        predicted = await self.predict(bundle)
        self.log(
            f"user {'skips' if skip else 'answers'} {bundle.pending_id[-6:]} "
            f"(model: {predicted}, hold={hold})"
        )
        self.start(
            "respond",
            self.rt.responder.respond(bundle.pending_id, answers, skip, None),
            pid=bundle.pending_id,
            predicted=predicted,
            hold=hold,
            skip=skip,
        )

    async def r_release(self) -> None:
        point = self.draw(st.sampled_from(sorted(parked_points())), label="release")
        self.log(f"release {point}")
        failpoints.clear(point)

    async def r_cancel_request(self) -> None:
        request = self.draw(st.sampled_from(self.live_tasks("respond")), label="request")
        self.log(f"cancel the respond request on {request.info['pid'][-6:]}")
        request.task.cancel()

    async def r_expire_confirm_wait(self) -> None:
        blocked = [t for t in self.live_tasks("respond") if self.respond_clock.blocked(t.task)]
        request = self.draw(st.sampled_from(blocked), label="request")
        self.log(f"the responder's confirmation wait on {request.info['pid'][-6:]} expires")
        self.respond_clock.expire(request.task)

    async def r_cancel_live(self) -> None:
        bundle = self.pick_bundle()
        predicted = await self.predict(bundle)
        self.log(f"cancel_live {bundle.pending_id[-6:]} (model: {predicted})")
        self.start(
            "cancel",
            self.rt.orchestrator.cancel_live(bundle.pending_id),
            pid=bundle.pending_id,
            predicted=predicted,
        )

    async def r_prompt(self) -> None:
        self.log("user sends a new prompt")
        self.start("prompt", self.rt.orchestrator.prompt(self.session_id, "more work"))

    async def r_ready(self) -> None:
        turn = self.pick_turn("ready turn")
        status = self.draw(st.sampled_from(["completed", "failed"]), label="status")
        stale_gen = self.draw(st.booleans(), label="older generation") and turn.generation > 1
        generation = turn.generation - 1 if stale_gen else turn.generation
        snap = await self.read()
        stale = turn.turn_id != snap.current_turn or generation != snap.session.prompt_generation
        if stale and "stale_ready" in SKIP:
            return self.log("(stale ready left out)")
        self.log(
            f"agent ready {status} for turn {turn.turn_id[-6:]} gen {generation} (stale={stale})"
        )
        if not stale_gen:
            turn.open = False  # the agent finished this turn (an older generation's is a ghost)
        self.start(
            "ready",
            self.rt.orchestrator.turn_complete(self.session_id, turn.turn_id, generation, status),
            stale=stale,
            step_before=snap.task_step,
        )

    async def r_message(self) -> None:
        turn = self.pick_turn("message turn", talking=True)
        expect = await self.callback_expectation(turn)
        self.log(f"agent message in turn {turn.turn_id[-6:]}")
        self.start(
            "message",
            self.rt.orchestrator.agent_message(
                self.session_id, turn.turn_id, turn.generation, "working"
            ),
            expect_accepted=expect,
            turn=turn,
        )

    async def r_fault(self) -> None:
        fault = self.draw(st.sampled_from([f for f in FAULTS if f not in SKIP]), label="fault")
        kind, _, name = fault.partition(":")
        self.log(f"arm fault {fault}")
        if kind == "agent":
            self.agent.faults.append(name)
        elif kind == "fp":
            if name not in failpoints.listing():
                failpoints.configure(name, "error", count=1)
        else:
            reservation = ("INSERT INTO TASK_SESSION_TURNS", "prompt_dispatch_pending")
            self.life.guard.fail_next = reservation

    async def r_release_dispatch(self) -> None:
        held = self.agent.held
        assert held is not None
        outcome = self.draw(
            st.sampled_from(["accept", "reject", "timeout", "accept_then_fail"]), label="outcome"
        )
        self.log(f"the held dispatch of turn {held.request.turn_id[-6:]} ends: {outcome}")
        held.outcome.set_result(outcome)

    async def r_fire_watchdog(self) -> None:
        self.log("the primary-answer watchdog's delay passes")
        self.watchdog_clock.fire()

    async def r_set_state(self) -> None:
        state = self.draw(
            st.sampled_from([SessionState.COMPLETED, SessionState.FAILED, SessionState.CANCELLED]),
            label="state",
        )
        self.log(f"user sets the session {state.value}")
        self.start("state", self.rt.orchestrator.set_state(self.session_id, state))

    async def r_restart(self) -> None:
        """Kill the process (its engine refuses everything from now on, its agent link is
        dead, its in-flight tasks are abandoned), then start a new one on a fresh engine."""
        old = self.life
        held = self.agent.held
        got_it = held is not None and self.draw(st.booleans(), label="held prompt reached agent")
        self.log(f"crash and restart (held dispatch reached the agent: {got_it})")
        old.guard.crashed = True
        old.link.dead = True
        if held is not None:
            if got_it:
                self.agent.accept(held.request)
            held.outcome.set_result("dead")
        for tracked in self.tracked:
            tracked.zombie = True
        await self.cancel_tracked()  # zombies run on into a dead engine
        await self.stop_life(old)
        self.restarts += 1
        self.bundles_after_crash()
        self.events_base = 0
        await self.boot()

    def respond_clock_release_all(self) -> None:
        for task in list(self.respond_clock.waits):
            self.respond_clock.expire(task)

    def bundles_after_crash(self) -> None:
        for bundle in self.bundles.values():
            if bundle.state != "terminal" and self.responds_on_any_zombie(bundle.pending_id):
                bundle.state = "unknown"

    def responds_on_any_zombie(self, pending_id: str) -> bool:
        return any(
            t.kind == "respond" and t.info["pid"] == pending_id and not t.handled
            for t in self.tracked
        )

    async def cancel_tracked(self) -> None:
        """Release every hold and timer, cancel every tracked call, and wait for them (their
        errors retrieved: after a crash they fail on the dead engine)."""
        failpoints.clear_all()
        self.respond_clock_release_all()
        pending = [t.task for t in self.tracked if not t.task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=20)
        for task in pending:
            if task.done() and not task.cancelled():
                task.exception()

    async def stop_life(self, life: Life) -> None:
        if life.collector is not None:
            life.collector.cancel()
        with contextlib.suppress(Exception):
            await life.runtime.projector.stop()
        with contextlib.suppress(Exception):
            await life.runtime.orchestrator.watchdog.shutdown()
        await life.guard.engine.dispose()

    # -- model ----------------------------------------------------------------------------

    async def callback_expectation(self, turn: AgentTurn) -> bool:
        """Must the backend accept this agent callback? Yes when its turn is the current turn
        by the repository rule, at that turn's generation, in a live session, and no
        reservation is pending (whose outcome the callback could not know)."""
        snap = await self.read()
        stored = snap.turn(turn.turn_id)
        return (
            turn.turn_id == snap.current_turn
            and stored is not None
            and stored.completed_at is None
            and not snap.unpublished()
            and snap.session.state not in ("COMPLETED", "FAILED", "CANCELLED")
        )

    async def predict(self, bundle: BundleModel) -> str | None:
        """The contract's state for a respond now: claimed, terminal, superseded, active."""
        if self.responds_on(bundle.pending_id):
            return "delivery_claimed"
        if bundle.state == "unknown":
            return None
        if bundle.state == "terminal" or self.session_terminal:
            return "terminal"
        snap = await self.read()
        if bundle.turn_id != snap.current_turn:
            return "superseded_history"
        return "active"

    async def discover_bundles(self) -> None:
        """Bundles the agent's asks created (found through their rows)."""
        async with read_tx(self.rt.engine) as conn:
            from backend.db.tables import messages

            rows = list(
                await conn.execute(
                    select(messages)
                    .where(
                        messages.c.session_id == self.session_id,
                        messages.c.type == "clarification_request",
                    )
                    .order_by(messages.c.created_at, messages.c.id)
                )
            )
        for row in rows:
            pid = row.metadata["pending_id"]
            if pid not in self.bundles:
                self.bundles[pid] = BundleModel(pid, row.turn_id, [])
            if row.id not in self.bundles[pid].message_ids:
                self.bundles[pid].message_ids.append(row.id)
