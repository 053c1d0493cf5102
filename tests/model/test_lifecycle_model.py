"""Model-based interleaving test of the clarification lifecycle (both databases).

Hypothesis draws a program: after a session's first turn, a sequence of rules chosen among
those enabled in the current state — the agent asks (live, or detaching), disconnects, sends
messages and ready events (also stale ones), the user answers/skips (possibly parked at a
fault point while other rules run, then released or cancelled), cancels, prompts, ends the
session, agent and publication faults are armed, and the backend process crashes and restarts
(its engine refuses every further statement; a new runtime recovers on a fresh engine). After
every step the system is settled and the invariants in ``judge.py`` are checked against the
database, the event stream and the fake agent's record.

Run: ``python -m pytest tests/model -m model`` (bounded) or add ``--hypothesis-profile=long``.
Counts explored are written to ``tests/artifacts/model-stats.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import AsyncEngine

import backend.clarifications.respond as respond_module
import backend.orchestrator.watchdog as watchdog_module
from tests.conftest import _truncate
from tests.model import judge
from tests.model.harness import RespondClock, WatchdogClock
from tests.model.profiles import model_settings
from tests.model.runner import System

SETTINGS = model_settings()
MAX_STEPS = SETTINGS.stateful_step_count
STATS_FILE = Path(__file__).resolve().parents[1] / "artifacts" / "model-stats.json"
_stats: dict[str, dict[str, int]] = {}
TIMES: dict[str, float] = {}


def _record(database: str, steps: int, restarts: int) -> None:
    entry = _stats.setdefault(database, {"examples": 0, "steps": 0, "restarts": 0})
    entry["examples"] += 1
    entry["steps"] += steps
    entry["restarts"] += restarts
    STATS_FILE.parent.mkdir(parents=True, exist_ok=True)
    STATS_FILE.write_text(json.dumps({**_stats, "times": TIMES}, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def clocks():
    """The responder's confirmation wait and the watchdog's delay, ended only by rules."""
    respond_clock, watchdog_clock = RespondClock(), WatchdogClock()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(respond_module, "asyncio", respond_clock)
        patch.setattr(watchdog_module, "asyncio", watchdog_clock)
        yield respond_clock, watchdog_clock


@pytest.mark.model
@SETTINGS
@given(data=st.data())
async def test_clarification_lifecycle_model(
    data: st.DataObject, engine: AsyncEngine, database_url: str, clocks
) -> None:
    await _truncate(engine)
    system = System(database_url, data.draw, clocks)
    try:
        await system.setup()
        await judge.settle_all(system)
        await judge.check(system)
        steps = data.draw(st.integers(1, MAX_STEPS), label="steps")
        for _ in range(steps):
            rule = data.draw(st.sampled_from(system.enabled()), label="rule")
            event(f"rule {rule}")
            started = time.perf_counter()
            await getattr(system, rule)()
            await judge.settle_all(system)
            await judge.check(system)
            TIMES[rule] = TIMES.get(rule, 0.0) + time.perf_counter() - started
        await judge.final_drain(system)
    finally:
        await judge.teardown(system)
        kind = "postgres" if "postgres" in database_url else "sqlite"
        _record(kind, system.steps, system.restarts)
