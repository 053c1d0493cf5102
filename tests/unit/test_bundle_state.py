"""The state machine's order of verdicts, from facts alone."""

from __future__ import annotations

import dataclasses

import pytest

from backend.authority import BundleFacts, BundleState, classify_bundle
from backend.authority.bundles import NoLiveWaiters


class Live:
    def has_waiter(self, pending_id: str) -> bool:
        return True


ACTIVE = BundleFacts(
    pending_id="p",
    session_id="s",
    task_id="t",
    request_type="clarification_request",
    turn_id="turn-2",
    current_turn_id="turn-2",
    session_state="WAITING_FOR_INPUT",
    pending_rows=1,
    intent_rows=0,
    row_count=1,
    is_active=True,
)


def facts(**changes) -> BundleFacts:
    return dataclasses.replace(ACTIVE, **changes)


def test_active_bundle_is_live_with_a_waiter_and_detached_without():
    assert classify_bundle(ACTIVE, Live()) is BundleState.ACTIVE_LIVE
    assert classify_bundle(ACTIVE, NoLiveWaiters()) is BundleState.ACTIVE_DETACHED


def test_delivery_intent_comes_first():
    claimed = facts(intent_rows=1, pending_rows=0, is_active=False, turn_id="turn-1")
    assert classify_bundle(claimed, Live()) is BundleState.DELIVERY_CLAIMED


@pytest.mark.parametrize(
    "changes",
    [
        {"pending_rows": 0, "is_active": False},
        {"session_state": "COMPLETED", "is_active": False},
        {"session_state": "CANCELLED", "is_active": False, "turn_id": "turn-1"},
    ],
)
def test_no_pending_row_or_terminal_session_is_terminal(changes):
    assert classify_bundle(facts(**changes), Live()) is BundleState.TERMINAL


@pytest.mark.parametrize(
    "changes", [{"turn_id": "turn-1"}, {"turn_id": None}, {"current_turn_id": None}]
)
def test_pending_rows_outside_the_current_turn_are_history(changes):
    inert = facts(is_active=False, **changes)
    assert classify_bundle(inert, Live()) is BundleState.SUPERSEDED_HISTORY


def test_only_the_active_states_report_active():
    assert {s for s in BundleState if s.is_active} == {
        BundleState.ACTIVE_LIVE,
        BundleState.ACTIVE_DETACHED,
    }
