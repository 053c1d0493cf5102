"""Outcomes of finished calls, and the invariants checked after every step."""

from __future__ import annotations

import asyncio
from typing import Any

from backend import failpoints
from backend.errors import (
    AgentUnavailable,
    Conflict,
    DeliveryFailed,
    NotActive,
    NotFound,
    SessionBusy,
    SessionTerminal,
    TurnNotCurrent,
)
from backend.vocabulary import SessionState
from tests.model.checks import (
    I1StuckClaim,
    I2Dispatch,
    I3Workflow,
    I4Busy,
    I5Revision,
    I6Respond,
    I7AgentView,
    I8StaleReady,
    I9Callback,
    Snapshot,
    Unexpected,
)
from tests.model.harness import Tracked, parked_points, settle
from tests.model.runner import System

TERMINAL = ("COMPLETED", "FAILED", "CANCELLED")
TOLD_STATUS = {
    "answered": "answered",
    "rejected": "rejected",
    "cancelled": "cancelled",
    "expired": "expired",
}


def _outcome(task: asyncio.Task[Any]) -> tuple[str, Any]:
    if task.cancelled():
        return "cancelled", None
    error = task.exception()
    if error is None:
        return "ok", task.result()
    return "error", error


async def settle_all(system: System) -> None:
    """Settle, then handle finished calls (which may start more), until nothing new ends."""
    while True:
        await settle(system.life.guard, system.tracked)
        fresh = [t for t in system.tracked if t.task.done() and not t.handled]
        await system.discover_bundles()
        for waiter in system.tracked:
            if waiter.kind == "waiter" and "pid" not in waiter.info and not waiter.zombie:
                claimed = {w.info.get("pid") for w in system.tracked if w.kind == "waiter"}
                new = [
                    b.pending_id
                    for b in system.bundles.values()
                    if b.turn_id == waiter.info["turn"].turn_id and b.pending_id not in claimed
                ]
                if new:
                    waiter.info["pid"] = new[0]
        if not fresh:
            return
        for tracked in fresh:
            tracked.handled = True
            if tracked.zombie:
                if not tracked.task.cancelled():
                    tracked.task.exception()
                continue
            handle(system, tracked)


def handle(system: System, t: Tracked) -> None:
    status, value = _outcome(t.task)
    if t.kind == "respond":
        return _respond_done(system, t, status, value)
    turn = t.info.get("turn")
    if status == "cancelled":
        if t.kind == "waiter":  # the agent's request dropped: it treats it as a detach
            turn.talking = False
        return None
    if status == "error" and isinstance(value, TurnNotCurrent):
        if turn is not None:  # a 409 callback: the agent stops that turn, completing nothing
            turn.open = False
        if t.info.get("expect_accepted"):
            raise I9Callback(f"{t.kind} of the current turn refused: {value}")
        return None
    if t.kind == "waiter":
        if status == "error":
            raise Unexpected(f"agent_clarification raised {value!r}")
        pid = value.pending_id
        bundle = system.bundles.get(pid)
        if value.outcome == "answered":
            system.agent.got_live_answer(pid)
            turn = t.info["turn"]  # the agent goes on with its turn: it says something
            system.start(
                "message",
                system.rt.orchestrator.agent_message(
                    system.session_id, turn.turn_id, turn.generation, "Got it"
                ),
                turn=turn,
            )
        if value.outcome in TOLD_STATUS and bundle is not None:
            bundle.agent_told = value.outcome
        if value.outcome in ("detached", "cancelled", "expired"):
            t.info["turn"].talking = False
        return None
    if status == "ok":
        if t.kind == "state":
            system.session_terminal = True
            for bundle in system.bundles.values():
                if bundle.state == "active":
                    bundle.state = "terminal"
        elif t.kind == "cancel" and t.info["predicted"] == "active":
            system.bundles[t.info["pid"]].state = "terminal"  # cancelled (else: unchanged)
        elif t.kind == "ready" and t.info["stale"]:
            system.post_checks.append(("stale_ready", t.info["step_before"]))
        return None
    if t.kind == "cancel" and isinstance(value, NotActive):
        # S24: a response that already claimed the bundle wins; cancel says so (409).
        claimed = value.extra.get("state") == "delivery_claimed"
        if claimed and t.info["predicted"] == "delivery_claimed":
            return None
        raise Unexpected(f"cancel raised {value!r}; the model says {t.info['predicted']}")
    expected = {
        "prompt": (SessionBusy, SessionTerminal, AgentUnavailable),
        "state": (Conflict,),
        "cancel": (NotFound,),
    }.get(t.kind, ())
    if not isinstance(value, expected):
        raise Unexpected(f"{t.kind} raised {value!r}")
    return None


def _respond_done(system: System, t: Tracked, status: str, value: Any) -> None:
    pid, predicted = t.info["pid"], t.info["predicted"]
    bundle = system.bundles[pid]
    if status == "cancelled":
        bundle.state = "unknown"
        bundle.outcomes.append("cancelled")
        return
    if status == "ok":
        bundle.outcomes.append(value)
        if predicted not in ("active", None):
            raise I6Respond(f"respond {pid[-6:]} returned {value}; the model says {predicted}")
        bundle.state = "terminal"
        return
    if isinstance(value, NotActive):
        state = value.extra.get("state")
        bundle.outcomes.append(f"409 {state}")
        if predicted is not None and predicted != state:
            raise I6Respond(f"respond {pid[-6:]}: 409 {state}; the model says {predicted}")
        return
    if isinstance(value, DeliveryFailed):
        retryable = value.extra.get("retryable")
        bundle.outcomes.append(f"500 retryable={retryable}")
        if predicted not in ("active", None):
            raise I6Respond(f"respond {pid[-6:]}: 500; the model says {predicted}")
        system.post_checks.append(("retryable" if retryable else "nonretryable", pid))
        bundle.state = "active" if retryable else "terminal"
        return
    if isinstance(value, SessionBusy):
        # Not a contract state for respond; it reads as "try again later", so the bundle must
        # be answerable again (restored before any dispatch).
        bundle.outcomes.append("409 session_busy")
        system.post_checks.append(("busy", pid))
        return
    if isinstance(value, SessionTerminal):
        # Not the contract's `not_active`/`terminal`, but equivalent: the session ended while
        # the claim was held. The bundle must not be left answerable or claimed.
        bundle.outcomes.append("409 session_terminal")
        system.post_checks.append(("nonretryable", pid))
        bundle.state = "terminal"
        return
    bundle.outcomes.append(f"500 internal {value!r}")
    bundle.state = "unknown"
    raise I6Respond(
        f"respond {pid[-6:]} failed with {value!r}: a 500 without `retryable` "
        "(the contract requires every respond 500 to say whether the answer may be re-sent)"
    )


def in_flight(system: System) -> bool:
    """A respond request (or a live delivery it started) has not finished."""
    return bool(system.live_tasks("respond")) or "waiter.before_confirm" in parked_points()


def quiet(system: System) -> bool:
    """Nothing but the agent's live waits is in flight."""
    busy = [t for t in system.live_tasks() if t.kind != "waiter"]
    return not busy and not parked_points() and system.agent.held is None


async def check(system: System) -> None:
    snap = await system.read()
    _post_checks(system, snap)
    owned = snap.reserved_claims()  # S29: recovery owns these
    stuck = [r for r in snap.intent_rows() if r.id not in owned]
    if stuck and not in_flight(system):
        held = sorted({r.metadata.get("pending_id")[-6:] for r in stuck})
        raise I1StuckClaim(f"bundles {held} stay delivery_claimed with no respond in flight")
    for pid, count in system.agent.received.items():
        if count > 1:
            raise I2Dispatch(f"answer {pid[-6:]} reached the agent {count} times")
    _workflow(snap)
    if quiet(system):
        _busy(system, snap)
    await _revisions(system, snap)
    _agent_view(system, snap)
    _model_agrees(system, snap)


def _post_checks(system: System, snap: Snapshot) -> None:
    checks, system.post_checks = system.post_checks, []
    for kind, arg in checks:
        if kind == "stale_ready" and snap.task_step != arg:
            raise I8StaleReady(f"a stale ready event moved the task {arg} -> {snap.task_step}")
        facts = snap.facts.get(arg) if kind != "stale_ready" else None
        if kind == "retryable" and (facts is None or not facts.is_active):
            raise I6Respond(
                f"respond {arg[-6:]} said retryable but the bundle is not active: {facts}"
            )
        if kind == "busy" and (facts is None or not facts.is_active):
            raise I6Respond(
                f"respond {arg[-6:]} answered 409 session_busy (not a respond contract state) "
                f"but the bundle can never be answered again: {facts}"
            )
        if kind == "nonretryable" and facts is not None and facts.intent_rows:
            claimed_ids = {r.id for r in snap.intent_rows() if r.metadata.get("pending_id") == arg}
            if claimed_ids and claimed_ids <= snap.reserved_claims():
                # S29: the rollback failed; the claim waits for start-up recovery, which
                # restores it (unattempted) or retires it (attempted). Adopt what it decides.
                system.bundles[arg].state = "unknown"
                continue
        if kind == "nonretryable" and (facts is None or facts.is_active or facts.intent_rows):
            raise I6Respond(f"respond {arg[-6:]} said not retryable but: {facts}")


def _workflow(snap: Snapshot) -> None:
    if snap.task_step == "In Progress":
        return
    terminal = snap.session.state in TERMINAL
    for pid, facts in snap.facts.items():
        created = min(r.created_at for r in snap.rows_of(pid))
        if created >= snap.task_moved_at:
            continue
        restorable = facts.intent_rows > 0 and facts.turn_id == facts.current_turn_id
        if facts.is_active or (restorable and not terminal):
            raise I3Workflow(
                f"task moved to {snap.task_step} while bundle {pid[-6:]} is "
                f"{'active' if facts.is_active else 'claimed and restorable'}"
            )


def _busy(system: System, snap: Snapshot) -> None:
    if snap.session.state != SessionState.RUNNING.value:
        return
    if snap.reserved_claims() and snap.unpublished():
        return  # S29: an unresolved reservation keeps the session busy until recovery
    generation = snap.session.prompt_generation
    for turn in system.agent_turns():
        stored = snap.turn(turn.turn_id)
        if (
            turn.open
            and turn.generation == generation
            and stored is not None
            and stored.completed_at is None
        ):
            return
    turns = [(t.prompt_generation, bool(t.completed_at), dict(t.metadata)) for t in snap.turns]
    raise I4Busy(
        f"session RUNNING at generation {generation} but no agent turn can finish it "
        f"(turns as (generation, completed, metadata): {turns})"
    )


async def _revisions(system: System, snap: Snapshot) -> None:
    revision, action = await system.projection()
    if system.last_read is not None and revision <= system.last_read:
        raise I5Revision(f"read revision {revision} not newer than {system.last_read}")
    system.last_read = revision
    truth = snap.pending_action.value if snap.pending_action is not None else None
    if action != truth:
        raise I5Revision(f"projection says {action}, the rule says {truth}")
    if not quiet(system) or system.live_tasks("waiter"):
        return
    newest: tuple[tuple[int, int], Any] | None = None
    for event in system.life.events:
        data = event.data
        if data.get("session_id") != system.session_id or "pending_action_revision" not in data:
            continue
        rev = data["pending_action_revision"]
        key = (int(rev["epoch"]), int(rev["sequence"]))
        if newest is None or key > newest[0]:
            newest = (key, data["pending_action"])
    if newest is not None and newest[1] != truth:
        raise I5Revision(
            f"an event-fed client keeps pending_action={newest[1]} (revision {newest[0]}) "
            f"while the rule says {truth} and nothing is in flight"
        )


def _agent_view(system: System, snap: Snapshot) -> None:
    for pid, bundle in system.bundles.items():
        if bundle.agent_told is None or system.responds_on(pid):
            continue
        statuses = {r.metadata.get("status") for r in snap.rows_of(pid)}
        facts = snap.facts.get(pid)
        if bundle.agent_told in ("cancelled", "expired") and facts is not None:
            # The wait ended without a response: rows may stay pending as inert history (a
            # superseded bundle), but the bundle must not be answerable or claimed.
            if facts.is_active or facts.intent_rows:
                raise I7AgentView(
                    f"the agent's wait for {pid[-6:]} returned {bundle.agent_told!r} but the "
                    f"bundle is still {'active' if facts.is_active else 'claimed'}"
                )
            continue
        if statuses != {TOLD_STATUS[bundle.agent_told]}:
            raise I7AgentView(
                f"the agent's wait for {pid[-6:]} returned {bundle.agent_told!r} "
                f"but its rows are {sorted(map(str, statuses))}"
            )


def _model_agrees(system: System, snap: Snapshot) -> None:
    for pid, bundle in system.bundles.items():
        facts = snap.facts.get(pid)
        if facts is None or system.responds_on(pid):
            continue
        if bundle.state == "terminal" and facts.is_active:
            raise I6Respond(f"bundle {pid[-6:]} ended (model) but is active again: {facts}")
        answerable = not facts.intent_rows and facts.pending_rows > 0
        if bundle.state == "active" and not system.session_terminal and not answerable:
            raise I6Respond(f"bundle {pid[-6:]} should be answerable (model) but: {facts}")
        if bundle.state == "unknown" and not facts.intent_rows:
            bundle.state = "active" if facts.pending_rows else "terminal"


async def final_drain(system: System) -> None:
    """Release everything, let every call end, then check once more (exactly-once)."""
    for _ in range(6):
        failpoints.clear_all()
        system.respond_clock_release_all()
        if system.agent.held is not None:
            system.agent.held.outcome.set_result("accept")
        system.agent.faults.clear()
        system.life.guard.fail_next = None
        await settle_all(system)
        await check(system)
        if not [t for t in system.live_tasks() if t.kind != "waiter"]:
            break
    system.watchdog_clock.fire()
    await settle_all(system)
    await check(system)
    for pid, bundle in system.bundles.items():
        if {"delivered", "resumed"} & set(bundle.outcomes) and system.agent.received[pid] != 1:
            raise I2Dispatch(
                f"respond reported {bundle.outcomes} for {pid[-6:]} but the agent got the "
                f"answer {system.agent.received[pid]} times"
            )


async def teardown(system: System) -> None:
    if system.agent.held is not None and not system.agent.held.outcome.done():
        system.agent.held.outcome.set_result("reject")
    await system.cancel_tracked()
    for life in system.lives:
        await system.stop_life(life)
    failpoints.clear_all()
