"""In-memory live waiters: the agent's open clarification request, per ``pending_id``.

A waiter is only a delivery channel. Whether its bundle is answerable is decided by the
database; losing the process loses the waiters, and the bundles become detached (still
answerable) by the rule, because "live" only means "a waiter exists here".
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class WaiterOutcome:
    """What the agent's wait ends with: ``answered`` (with answers), ``rejected`` or
    ``expired`` (the session became terminal).

    A response carries its delivery ``intent_id``; the waiter must durably confirm it (retire
    the intent) before the agent sees the answer, and reports the confirmed rows through
    ``confirmation`` (empty when the responder restored the claim first).
    """

    outcome: str
    answers: tuple[dict[str, Any], ...] = ()
    intent_id: str | None = None
    confirmation: asyncio.Future[list[dict[str, Any]]] | None = None


@dataclass(slots=True)
class LiveWaiter:
    pending_id: str
    session_id: str
    turn_id: str
    prompt_generation: int
    future: asyncio.Future[WaiterOutcome] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class WaiterRegistry:
    """Process-local map of open waits; implements :class:`backend.authority.LiveWaiters`."""

    def __init__(self) -> None:
        self._waiters: dict[str, LiveWaiter] = {}

    def register(self, waiter: LiveWaiter) -> None:
        self._waiters[waiter.pending_id] = waiter

    @contextmanager
    def until_committed(self) -> Iterator[Callable[[LiveWaiter], None]]:
        """Register waiters inside the transaction that stores their question, before its
        commit makes the row visible, so no reader ever sees a stored question without its
        waiter (the rule would call it detached, and an answer would take the detached path
        while the agent is about to wait). Wrap the whole transaction: when it fails (rolled
        back, or its commit's outcome unknown) the waiters it registered are dropped again."""
        held: list[LiveWaiter] = []

        def hold(waiter: LiveWaiter) -> None:
            self.register(waiter)
            held.append(waiter)

        try:
            yield hold
        except BaseException:
            for waiter in held:
                if self._waiters.get(waiter.pending_id) is waiter:
                    del self._waiters[waiter.pending_id]
            raise

    def has_waiter(self, pending_id: str) -> bool:
        waiter = self._waiters.get(pending_id)
        return waiter is not None and not waiter.future.done()

    def get(self, pending_id: str) -> LiveWaiter | None:
        return self._waiters.get(pending_id)

    def resolve(self, pending_id: str, outcome: WaiterOutcome) -> bool:
        """Hand ``outcome`` to the waiting agent; False if nobody is waiting any more."""
        waiter = self._waiters.pop(pending_id, None)
        if waiter is None or waiter.future.done():
            return False
        waiter.future.set_result(outcome)
        return True

    def drop(self, pending_id: str) -> LiveWaiter | None:
        """Forget the waiter (its wait ended without an outcome)."""
        return self._waiters.pop(pending_id, None)

    def of_session(self, session_id: str) -> list[LiveWaiter]:
        return [w for w in self._waiters.values() if w.session_id == session_id]

    def all(self) -> list[LiveWaiter]:
        """Every registered waiter (shutdown ends them)."""
        return list(self._waiters.values())
