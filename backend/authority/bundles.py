"""Bundle states: the spec's five-state machine, decided from facts the repository reads.

Pure code (no I/O) so the ordering of the states is unit-tested on its own; the facts come from
:func:`backend.authority.repository.bundle_facts`, whose ``is_active`` flag is computed by the
same SQL predicate as every other consumer's (:func:`backend.authority.sql.is_active_bundle`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from backend.vocabulary import TERMINAL_SESSION_STATES


class BundleState(StrEnum):
    ACTIVE_LIVE = "active_live"
    ACTIVE_DETACHED = "active_detached"
    DELIVERY_CLAIMED = "delivery_claimed"
    TERMINAL = "terminal"
    SUPERSEDED_HISTORY = "superseded_history"

    @property
    def is_active(self) -> bool:
        return self in (BundleState.ACTIVE_LIVE, BundleState.ACTIVE_DETACHED)


class LiveWaiters(Protocol):
    """Who holds an in-memory waiter; the orchestrator's registry implements this."""

    def has_waiter(self, pending_id: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class BundleFacts:
    """What the database says about one bundle (all rows sharing a ``pending_id``)."""

    pending_id: str
    session_id: str
    task_id: str
    request_type: str
    #: The single non-empty turn id its rows share; ``None`` if none or conflicting.
    turn_id: str | None
    current_turn_id: str | None
    session_state: str
    pending_rows: int
    intent_rows: int
    row_count: int
    #: The repository rule's verdict (same SQL predicate as the pending projection).
    is_active: bool
    #: The worker whose live waiter holds the bundle, while its rows still wait (not yet
    #: detached); whether that worker lives is read separately (``backend/workers.py``).
    live_worker: str | None = None


def classify_bundle(
    facts: BundleFacts, waiters: LiveWaiters, *, held_elsewhere: bool = False
) -> BundleState:
    """The contract's order: claimed, then terminal, then superseded, then active.

    Live means a waiter holds it: in this process's ``waiters``, or (``held_elsewhere``) in
    another worker that lives and holds it by the bundle's stamp.

    ``is_active`` already implies "no intent, some pending row, live session, current turn",
    so checking it second gives the same answer as the contract's order while leaving the
    definition of "active" in exactly one place.
    """
    if facts.intent_rows > 0:
        return BundleState.DELIVERY_CLAIMED
    if facts.is_active:
        if held_elsewhere or waiters.has_waiter(facts.pending_id):
            return BundleState.ACTIVE_LIVE
        return BundleState.ACTIVE_DETACHED
    if facts.pending_rows == 0 or facts.session_state in TERMINAL_SESSION_STATES:
        return BundleState.TERMINAL
    return BundleState.SUPERSEDED_HISTORY


class AnyWaiters:
    """Live in any of several registries: clarification and permission requests each have
    their own (so neither path can resolve the other's), and a bundle list shows both."""

    def __init__(self, *registries: LiveWaiters) -> None:
        self._registries = registries

    def has_waiter(self, pending_id: str) -> bool:
        return any(registry.has_waiter(pending_id) for registry in self._registries)


class NoLiveWaiters:
    """For readers that run where no waiter can exist (start-up recovery, other workers)."""

    def has_waiter(self, pending_id: str) -> bool:
        return False
