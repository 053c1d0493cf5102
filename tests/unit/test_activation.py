"""Task activation (``state.activation``): projections, owner selection, generations, sheets.

Each scenario test runs for the desktop sidebar and for a phone task sheet: the same functions
decide both, and the phone variant must additionally close exactly its own sheet.
"""

from __future__ import annotations

import ast
import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from state.activation import (
    DESKTOP,
    ActivationFlow,
    ClearActiveSession,
    CloseSheet,
    Decision,
    DecisionKind,
    Effect,
    LoadAborted,
    Loaded,
    LoadFailed,
    LoadTicket,
    OpenSession,
    OpenTaskRoute,
    PayloadError,
    Reason,
    ReleaseLayout,
    Revision,
    RevisionError,
    SessionInfo,
    SessionProjections,
    TaskSummary,
    as_outcome,
    choose_session,
    sessions_from_json,
)

TASK = "task-1"
OTHER_TASK = "task-2"


# -- builders -------------------------------------------------------------------------------


def rev(epoch: int | str, sequence: int) -> dict[str, Any]:
    return {"epoch": str(epoch), "sequence": sequence}


def session_json(
    session_id: str,
    *,
    pending: str | None = None,
    revision: tuple[int, int] = (1, 1),
    created: str = "2026-08-14T10:00:00Z",
    primary: bool = False,
    capable: bool = True,
    task_id: str = TASK,
) -> dict[str, Any]:
    return {
        "id": session_id,
        "task_id": task_id,
        "state": "WAITING_FOR_INPUT" if capable else "COMPLETED",
        "is_primary": primary,
        "input_capable": capable,
        "pending_action": pending,
        "pending_action_revision": rev(*revision),
        "created_at": created,
    }


def listing(*sessions: dict[str, Any]) -> dict[str, Any]:
    return {"sessions": list(sessions)}


def infos(*sessions: dict[str, Any]) -> list[SessionInfo]:
    return [SessionInfo.from_json(s) for s in sessions]


def summary(
    pending: str | None = "clarification", revision: int | None = 3, task_id: str = TASK
) -> TaskSummary:
    return TaskSummary(task_id=task_id, revision=revision, pending_action=pending)


def legacy_summary(pending: str | None = "clarification", task_id: str = TASK) -> TaskSummary:
    """A task whose ``status_summary`` is null: only the legacy top-level field remains."""
    return TaskSummary.from_task({"id": task_id, "status_summary": None, "pending_action": pending})


@dataclass
class Surface:
    """One activation surface under test: the desktop sidebar or a mounted phone sheet."""

    flow: ActivationFlow
    surface_id: str
    phone: bool

    @property
    def sheet(self) -> tuple[Effect, ...]:
        return (CloseSheet(self.surface_id),) if self.phone else ()

    def opened(self, session_id: str, task_id: str = TASK) -> tuple[Effect, ...]:
        return (OpenSession(task_id, session_id), *self.sheet)

    def fallback(self, active: str | None, task_id: str = TASK) -> tuple[Effect, ...]:
        return (ReleaseLayout(active), ClearActiveSession(), OpenTaskRoute(task_id), *self.sheet)

    def begin(self, task: TaskSummary) -> LoadTicket:
        return self.flow.begin(task, surface=self.surface_id)


@pytest.fixture(params=["desktop", "phone"])
def ui(request: pytest.FixtureRequest) -> Surface:
    flow = ActivationFlow()
    if request.param == "desktop":
        return Surface(flow, DESKTOP, phone=False)
    flow.mount_sheet("phone-sheet")
    return Surface(flow, "phone-sheet", phone=True)


def assert_inert(decision: Decision) -> None:
    assert decision.kind is DecisionKind.INERT
    assert decision.inert
    assert decision.effects == ()
    assert decision.session_id is None


# -- revisions ------------------------------------------------------------------------------


def test_epoch_beyond_2_53_compares_exactly() -> None:
    """2**53 + 1 and 2**53 are the same float; as decimal strings they must stay distinct."""
    low = Revision.parse(rev("9007199254740992", 5))
    high = Revision.parse(rev("9007199254740993", 0))
    assert float(low.epoch) == float(high.epoch)  # why the epoch is a string
    assert high > low
    assert high.epoch == 2**53 + 1


def test_epoch_compares_as_a_number_not_as_text() -> None:
    assert Revision.parse(rev("10", 0)) > Revision.parse(rev("9", 999))


def test_epoch_outranks_sequence() -> None:
    assert Revision.parse(rev(2, 0)) > Revision.parse(rev(1, 10**9))
    assert Revision.parse(rev(2, 4)) > Revision.parse(rev(2, 3))
    assert Revision.parse(rev(2, 3)) == Revision.parse({"epoch": "002", "sequence": 3})


def test_integer_epoch_is_accepted_too() -> None:
    assert Revision.parse({"epoch": 7, "sequence": 1}) == Revision(7, 1)


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "1:2",
        {},
        {"epoch": "1"},
        {"sequence": 1},
        {"epoch": 1.0, "sequence": 1},
        {"epoch": "1.5", "sequence": 1},
        {"epoch": "-1", "sequence": 1},
        {"epoch": " 1", "sequence": 1},
        {"epoch": "1_0", "sequence": 1},
        {"epoch": "1e3", "sequence": 1},
        {"epoch": "\u0661", "sequence": 1},  # ARABIC-INDIC DIGIT ONE: int() would accept it
        {"epoch": "", "sequence": 1},
        {"epoch": True, "sequence": 1},
        {"epoch": -3, "sequence": 1},
        {"epoch": "9" * 5000, "sequence": 1},  # beyond int()'s default digit limit
        {"epoch": "1", "sequence": "2"},
        {"epoch": "1", "sequence": True},
        {"epoch": "1", "sequence": -1},
        {"epoch": "1", "sequence": 2.0},
    ],
)
def test_unorderable_revisions_are_rejected(raw: object) -> None:
    with pytest.raises(RevisionError):
        Revision.parse(raw)
    store = SessionProjections()
    assert store.apply("s", True, "clarification", raw) is False
    assert store.get("s") is None


# -- projection store -----------------------------------------------------------------------


@pytest.mark.scenario("S05")
def test_new_question_event_advances_a_cached_explicit_clean_projection() -> None:
    store = SessionProjections()
    assert store.apply_sessions(infos(session_json("b", pending=None, revision=(4, 7)))) == {"b"}
    assert store.get("b") is not None
    assert store.pending_action("b") is None
    event = {
        "session_id": "b",
        "task_id": TASK,
        "message": {"id": "m1", "type": "clarification_request"},
        "pending_action": "clarification",
        "pending_action_revision": rev(4, 8),
    }
    assert store.apply_event(event) is True
    entry = store.get("b")
    assert entry is not None
    assert entry.pending_action == "clarification"
    assert entry.revision == Revision(4, 8)


@pytest.mark.scenario("S06")
@pytest.mark.parametrize("order", ["rest_first", "event_first"])
def test_newest_projection_wins_in_either_delivery_order(order: str) -> None:
    store = SessionProjections()
    rest = infos(session_json("b", pending=None, revision=(4, 10)))
    event = {
        "session_id": "b",
        "pending_action": "clarification",
        "pending_action_revision": rev(4, 11),
    }
    if order == "rest_first":
        assert store.apply_sessions(rest) == {"b"}
        assert store.apply_event(event) is True
    else:
        assert store.apply_event(event) is True
        assert store.apply_sessions(rest) == frozenset()
    assert store.pending_action("b") == "clarification"
    assert store.get("b").revision == Revision(4, 11)  # type: ignore[union-attr]


@pytest.mark.scenario("S06")
def test_in_flight_list_cannot_replace_the_event_projection_used_for_selection(
    ui: Surface,
) -> None:
    """The list request reserved its revision before the event; the event's owner is chosen."""
    ticket = ui.begin(summary("clarification"))
    ui.flow.projections.apply_event(
        {"session_id": "b", "pending_action": "clarification", "pending_action_revision": rev(1, 9)}
    )
    response = listing(
        session_json("a", primary=True, revision=(1, 8)),
        session_json("b", pending=None, revision=(1, 8)),
    )
    decision = ui.flow.settle(ticket, response, summary("clarification"))
    assert decision.session_id == "b"
    assert decision.effects == ui.opened("b")
    assert ui.flow.projections.pending_action("b") == "clarification"


def test_event_omitting_pending_action_preserves_value_and_revision() -> None:
    store = SessionProjections()
    assert store.apply("b", True, "clarification", rev(2, 3))
    content_only = {"session_id": "b", "message": {"id": "m"}, "pending_action_revision": rev(2, 9)}
    assert store.apply_event(content_only) is False
    assert store.apply("b", False, None, rev(2, 10)) is False
    entry = store.get("b")
    assert entry is not None
    assert (entry.pending_action, entry.revision) == ("clarification", Revision(2, 3))
    # The omission did not advance the revision, so the next real projection still applies.
    assert store.apply("b", True, None, rev(2, 4)) is True


def test_explicit_null_means_clean() -> None:
    store = SessionProjections()
    store.apply("b", True, "clarification", rev(2, 3))
    assert store.apply_event(
        {"session_id": "b", "pending_action": None, "pending_action_revision": rev(2, 4)}
    )
    entry = store.get("b")
    assert entry is not None
    assert entry.pending_action is None


@pytest.mark.parametrize("older", [(2, 3), (2, 2), (1, 99)])
def test_older_or_equal_revision_is_ignored(older: tuple[int, int]) -> None:
    store = SessionProjections()
    assert store.apply("b", True, None, rev(2, 3))
    assert store.apply("b", True, "clarification", rev(*older)) is False
    assert store.pending_action("b") is None
    assert store.get("b").revision == Revision(2, 3)  # type: ignore[union-attr]


def test_unseen_pre_restart_epoch_is_rejected_after_rebuild() -> None:
    store = SessionProjections()
    store.rebuild("7")
    assert store.epoch_floor == 7
    assert store.apply("never-seen", True, "clarification", rev(6, 500)) is False
    assert store.get("never-seen") is None
    assert store.apply("never-seen", True, "clarification", rev(7, 1)) is True


def test_accepting_a_newer_epoch_raises_the_floor_for_unseen_sessions() -> None:
    store = SessionProjections()
    assert store.apply("a", True, None, rev(5, 1))
    assert store.apply("a", True, None, rev(6, 1))
    assert store.epoch_floor == 6
    assert store.apply("b", True, "clarification", rev(5, 99)) is False
    assert "b" not in store


def test_rebuild_drops_older_generations_keeps_current_and_never_lowers_the_floor() -> None:
    store = SessionProjections()
    store.apply("old", True, "clarification", rev(3, 1))
    store.apply("cur", True, None, rev(4, 5))
    store.rebuild(4)
    assert "old" not in store
    assert "cur" in store
    # A same-generation late result still cannot replace the newer value that survived.
    assert store.apply("cur", True, "clarification", rev(4, 4)) is False
    store.rebuild("2")
    assert store.epoch_floor == 4
    with pytest.raises(RevisionError):
        store.rebuild("4.0")


@pytest.mark.parametrize("value", [5, True, ["clarification"], {"a": 1}])
def test_non_string_pending_action_is_rejected(value: object) -> None:
    store = SessionProjections()
    store.apply("b", True, "clarification", rev(1, 1))
    assert store.apply("b", True, value, rev(1, 2)) is False
    assert store.pending_action("b") == "clarification"


def test_event_without_session_id_is_ignored() -> None:
    store = SessionProjections()
    assert (
        store.apply_event({"pending_action": None, "pending_action_revision": rev(1, 1)}) is False
    )
    assert len(store) == 0


# -- payload parsing ------------------------------------------------------------------------


def test_task_summary_from_task_and_legacy_fallback() -> None:
    modern = TaskSummary.from_task(
        {
            "id": TASK,
            "status_summary": {
                "revision": 9,
                "pending_action": "permission",
                "primary_session_id": "a",
            },
            "pending_action": "clarification",  # legacy field loses to the summary
        }
    )
    assert modern == TaskSummary(TASK, 9, "permission", "a")
    assert not modern.legacy
    legacy = legacy_summary("clarification")
    assert legacy.legacy
    assert legacy.pending_action == "clarification"
    assert TaskSummary.from_task({"id": TASK, "status_summary": None}).pending_action is None
    assert TaskSummary.from_task({"id": TASK, "pending_action": ""}).pending_action is None
    with pytest.raises(PayloadError):
        TaskSummary.from_task({"status_summary": None})


def test_session_flags_count_only_when_true() -> None:
    raw = session_json("a") | {"input_capable": "true", "is_primary": 1}
    parsed = SessionInfo.from_json(raw)
    assert parsed.input_capable is False
    assert parsed.is_primary is False
    with pytest.raises(PayloadError):
        sessions_from_json({"sessions": "nope"})
    with pytest.raises(PayloadError):
        sessions_from_json({"sessions": [session_json("a") | {"pending_action": 3}]})


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (asyncio.CancelledError(), LoadAborted),
        (LoadAborted(), LoadAborted),
        (RuntimeError("500"), LoadFailed),
        ({"sessions": [{"id": "a"}]}, LoadFailed),
        ({"error": "internal"}, LoadFailed),
        (listing(session_json("a")), Loaded),
        ([], Loaded),
    ],
)
def test_load_results_normalise(result: Any, expected: type) -> None:
    assert isinstance(as_outcome(result), expected)


# -- owner selection: pending tasks ---------------------------------------------------------


@pytest.mark.scenario("S09")
def test_pending_secondary_session_outranks_remembered_and_primary(ui: Surface) -> None:
    task = summary("clarification")
    ticket = ui.begin(task)
    assert ticket.force is True  # bypass any cached session list
    response = listing(
        session_json("primary", primary=True, created="2026-08-14T09:00:00Z"),
        session_json("secondary", pending="clarification", created="2026-08-14T09:30:00Z"),
        session_json("newest-clean", created="2026-08-14T11:00:00Z"),
    )
    decision = ui.flow.settle(
        ticket, response, task, remembered_session_id="primary", active_session_id="primary"
    )
    assert decision.kind is DecisionKind.OPEN_SESSION
    assert decision.reason is Reason.PENDING_OWNER
    assert decision.session_id == "secondary"
    assert decision.effects == ui.opened("secondary")


def test_clean_task_may_use_the_cached_list() -> None:
    flow = ActivationFlow()
    assert flow.begin(summary(None)).force is False
    assert flow.begin(legacy_summary("permission"), surface=DESKTOP).force is True


def test_newest_matching_input_capable_owner_is_chosen() -> None:
    sessions = infos(
        session_json("old-owner", pending="clarification", created="2026-08-14T10:00:00Z"),
        session_json("new-owner", pending="clarification", created="2026-08-14T10:00:00.500Z"),
        session_json(
            "terminal", pending="clarification", created="2026-08-14T12:00:00Z", capable=False
        ),
        session_json("permission", pending="permission", created="2026-08-14T13:00:00Z"),
        session_json(
            "other-task",
            pending="clarification",
            created="2026-08-14T14:00:00Z",
            task_id=OTHER_TASK,
        ),
    )
    decision = choose_session(summary("clarification"), sessions, "old-owner")
    # "…00.500Z" sorts before "…00Z" as text; as a time it is newer.
    assert decision.session_id == "new-owner"
    assert choose_session(summary("permission"), sessions).session_id == "permission"


def test_equal_created_at_breaks_ties_by_id() -> None:
    sessions = infos(
        session_json("s-b", pending="clarification"),
        session_json("s-c", pending="clarification"),
        session_json("s-a", pending="clarification"),
    )
    assert choose_session(summary(), sessions).session_id == "s-c"


def test_store_value_decides_owner_and_unknown_sessions_never_own() -> None:
    store = SessionProjections()
    sessions = infos(
        session_json("a", pending="clarification", revision=(3, 1)),
        session_json("b", pending=None, revision=(3, 1)),
    )
    store.apply("a", True, None, rev(3, 5))  # newer: a is clean now
    store.apply("b", True, "clarification", rev(3, 5))  # newer: b owns the question
    assert choose_session(summary(), sessions, projections=store).session_id == "b"
    # A session whose projection the store refused (pre-restart epoch) cannot be guessed.
    fresh = SessionProjections(epoch_floor=4)
    decision = choose_session(summary(), sessions, projections=fresh, active_session_id="x")
    assert decision.kind is DecisionKind.OPEN_TASK
    assert decision.reason is Reason.NO_PENDING_OWNER


@pytest.mark.scenario("S14")
@pytest.mark.parametrize(
    "sessions",
    [
        [],
        [
            session_json("primary", primary=True),
            session_json("asks-permission", pending="permission"),
            session_json("terminal-owner", pending="clarification", capable=False),
        ],
    ],
    ids=["no-sessions", "no-matching-owner"],
)
def test_pending_task_without_owner_releases_layout_before_clearing(
    ui: Surface, sessions: list[dict[str, Any]]
) -> None:
    task = summary("clarification")
    ticket = ui.begin(task)
    decision = ui.flow.settle(
        ticket,
        listing(*sessions),
        task,
        remembered_session_id="primary",
        active_session_id="outgoing",
    )
    assert decision.kind is DecisionKind.OPEN_TASK
    assert decision.reason is Reason.NO_PENDING_OWNER
    assert decision.session_id is None
    assert decision.effects == ui.fallback("outgoing")
    kinds = [type(e) for e in decision.effects]
    assert kinds.index(ReleaseLayout) < kinds.index(ClearActiveSession) < kinds.index(OpenTaskRoute)


# -- owner selection: clean tasks -----------------------------------------------------------


CLEAN_SESSIONS = (
    session_json("primary", primary=True, created="2026-08-14T08:00:00Z"),
    session_json("remembered", created="2026-08-14T09:00:00Z"),
    session_json("newest", created="2026-08-14T12:00:00Z", pending="clarification"),
)


def test_clean_task_prefers_the_remembered_session() -> None:
    decision = choose_session(summary(None), infos(*CLEAN_SESSIONS), "remembered")
    assert (decision.session_id, decision.reason) == ("remembered", Reason.REMEMBERED)


def test_clean_task_falls_back_to_primary_when_remembered_is_gone() -> None:
    decision = choose_session(summary(None), infos(*CLEAN_SESSIONS), "deleted-session")
    assert (decision.session_id, decision.reason) == ("primary", Reason.PRIMARY)


def test_clean_task_uses_summary_primary_when_no_session_is_flagged() -> None:
    sessions = infos(session_json("x", created="2026-08-14T08:00:00Z"), session_json("y"))
    task = TaskSummary(TASK, 3, None, primary_session_id="x")
    assert choose_session(task, sessions).session_id == "x"


def test_clean_task_falls_back_to_newest_then_task_route() -> None:
    no_primary = infos(*CLEAN_SESSIONS[1:])
    decision = choose_session(summary(None), no_primary, None)
    # A stale session-level pending value does not steer a clean task; newest wins on time.
    assert (decision.session_id, decision.reason) == ("newest", Reason.NEWEST)
    empty = choose_session(summary(None), [], "remembered", active_session_id="out", sheet_id="s")
    assert empty.reason is Reason.NO_SESSIONS
    assert empty.effects == (
        ReleaseLayout("out"),
        ClearActiveSession(),
        OpenTaskRoute(TASK),
        CloseSheet("s"),
    )


def test_clean_task_ignores_a_remembered_session_of_another_task() -> None:
    sessions = infos(
        session_json("primary", primary=True), session_json("foreign", task_id=OTHER_TASK)
    )
    assert choose_session(summary(None), sessions, "foreign").session_id == "primary"


def test_clean_activation_through_the_flow(ui: Surface) -> None:
    task = summary(None)
    decision = ui.flow.settle(
        ui.begin(task), listing(*CLEAN_SESSIONS), task, remembered_session_id="remembered"
    )
    assert decision.effects == ui.opened("remembered")


# -- settle: revalidation, failures, disappearance ------------------------------------------


@pytest.mark.scenario("S11")
@pytest.mark.parametrize(
    "newer",
    [
        summary("permission", revision=4),
        summary(None, revision=4),
        summary("clarification", revision=4),
        legacy_summary("clarification"),  # summary invalidated: revision unknown
    ],
    ids=["action-changed", "action-cleared", "revision-advanced", "summary-invalidated"],
)
def test_summary_change_discards_owner_and_opens_task_route(
    ui: Surface, newer: TaskSummary
) -> None:
    ticket = ui.begin(summary("clarification", revision=3))
    response = listing(
        session_json("primary", primary=True), session_json("owner", pending="clarification")
    )
    decision = ui.flow.settle(ticket, response, newer, active_session_id="outgoing")
    assert decision.kind is DecisionKind.OPEN_TASK
    assert decision.reason is Reason.SUMMARY_CHANGED
    assert decision.effects == ui.fallback("outgoing")
    assert OpenSession(TASK, "owner") not in decision.effects


@pytest.mark.scenario("S38")
def test_moved_ownership_ignores_the_stale_owner_but_still_opens_the_task(ui: Surface) -> None:
    """The response still names ``a`` as owner, but the question moved to ``b`` meanwhile."""
    ticket = ui.begin(summary("clarification", revision=3))
    response = listing(
        session_json("a", pending="clarification", revision=(1, 5)),
        session_json("b", pending=None, revision=(1, 5)),
    )
    decision = ui.flow.settle(ticket, response, summary("clarification", revision=4))
    assert decision.kind is DecisionKind.OPEN_TASK
    assert decision.session_id is None
    assert decision.effects == ui.fallback(None)
    # The snapshot itself was authoritative and newer than nothing: it is kept.
    assert ui.flow.projections.pending_action("a") == "clarification"


@pytest.mark.parametrize(
    "failure",
    [RuntimeError("HTTP 500 internal"), LoadFailed("internal"), {"error": "internal"}],
    ids=["exception", "outcome", "bad-payload"],
)
def test_failed_load_falls_back_to_task_route(ui: Surface, failure: Any) -> None:
    task = summary("clarification")
    decision = ui.flow.settle(ui.begin(task), failure, task, active_session_id="outgoing")
    assert decision.reason is Reason.LOAD_FAILED
    assert decision.effects == ui.fallback("outgoing")


@pytest.mark.scenario("S41")
@pytest.mark.parametrize("projection", ["status_summary", "legacy"])
def test_task_disappearing_mid_load_leaves_selection_unchanged(
    ui: Surface, projection: str
) -> None:
    task = summary("clarification") if projection == "status_summary" else legacy_summary()
    ticket = ui.begin(task)
    response = listing(session_json("owner", pending="clarification"))
    decision = ui.flow.settle(ticket, response, None, active_session_id="outgoing")
    assert_inert(decision)
    assert decision.reason is Reason.TASK_GONE
    assert len(ui.flow.projections) == 0  # the deleted task's sessions were not applied


def test_legacy_projection_still_present_selects_its_owner(ui: Surface) -> None:
    ticket = ui.begin(legacy_summary())
    response = listing(
        session_json("primary", primary=True), session_json("owner", pending="clarification")
    )
    decision = ui.flow.settle(ticket, response, legacy_summary(), remembered_session_id="primary")
    assert decision.effects == ui.opened("owner")


# -- overlapping loads ----------------------------------------------------------------------


@pytest.mark.scenario("S12")
def test_older_response_finishing_last_cannot_overwrite_or_revive(ui: Surface) -> None:
    task = summary("clarification")
    older = ui.begin(task)
    newer = ui.begin(task)
    assert older.generation in newer.supersedes
    assert not ui.flow.is_current(older)
    assert ui.flow.is_current(newer)

    won = ui.flow.settle(
        newer,
        listing(
            session_json("a", pending=None, revision=(1, 20)),
            session_json("b", pending="clarification", revision=(1, 20)),
        ),
        task,
    )
    assert won.effects == ui.opened("b")

    late = ui.flow.settle(
        older,
        listing(
            session_json("a", pending="clarification", revision=(1, 10)),
            session_json("b", pending=None, revision=(1, 10)),
        ),
        task,
    )
    assert_inert(late)
    store = ui.flow.projections
    assert (store.pending_action("a"), store.pending_action("b")) == (None, "clarification")
    assert store.get("b").revision == Revision(1, 20)  # type: ignore[union-attr]


@pytest.mark.scenario("S12")
def test_overlapping_loads_from_two_surfaces_guard_per_task() -> None:
    flow = ActivationFlow()
    flow.mount_sheet("sheet")
    task = summary("clarification")
    older = flow.begin(task, surface=DESKTOP)
    newer = flow.begin(task, surface="sheet")
    assert newer.supersedes == (older.generation,)
    stale = flow.settle(
        older, listing(session_json("a", pending="clarification", revision=(1, 1))), task
    )
    assert_inert(stale)
    assert stale.reason is Reason.LOAD_SUPERSEDED
    assert "a" not in flow.projections
    fresh = flow.settle(
        newer, listing(session_json("b", pending="clarification", revision=(1, 2))), task
    )
    assert fresh.effects == (OpenSession(TASK, "b"), CloseSheet("sheet"))


@pytest.mark.scenario("S42")
@pytest.mark.parametrize(
    "abort", [asyncio.CancelledError(), LoadAborted()], ids=["cancelled", "outcome"]
)
@pytest.mark.parametrize("order", ["winner_first", "abort_first"])
def test_aborted_older_load_is_inert(ui: Surface, abort: Any, order: str) -> None:
    task = summary("clarification")
    older = ui.begin(task)
    newer = ui.begin(task)
    response = listing(session_json("owner", pending="clarification", revision=(1, 3)))
    if order == "winner_first":
        won = ui.flow.settle(newer, response, task, active_session_id="prev")
        lost = ui.flow.settle(older, abort, task, active_session_id="owner")
    else:
        lost = ui.flow.settle(older, abort, task, active_session_id="prev")
        won = ui.flow.settle(newer, response, task, active_session_id="prev")
    assert_inert(lost)  # in particular: no task-only fallback, no sheet closed
    assert won.effects == ui.opened("owner")


@pytest.mark.scenario("S42")
def test_abort_of_the_current_load_is_not_a_failure(ui: Surface) -> None:
    task = summary("clarification")
    decision = ui.flow.settle(ui.begin(task), asyncio.CancelledError(), task, active_session_id="a")
    assert_inert(decision)
    assert decision.reason is Reason.ABORTED


def test_newer_activation_on_the_same_surface_supersedes_another_task(ui: Surface) -> None:
    first = ui.begin(summary("clarification"))
    second = ui.begin(summary(None, task_id=OTHER_TASK))
    assert first.generation in second.supersedes
    stale = ui.flow.settle(
        first, listing(session_json("owner", pending="clarification")), summary()
    )
    assert_inert(stale)
    assert stale.reason is Reason.SELECTION_SUPERSEDED
    decision = ui.flow.settle(
        second,
        listing(session_json("x", task_id=OTHER_TASK, primary=True)),
        summary(None, task_id=OTHER_TASK),
    )
    assert decision.effects == ui.opened("x", task_id=OTHER_TASK)


def test_a_ticket_settles_once(ui: Surface) -> None:
    task = summary("clarification")
    ticket = ui.begin(task)
    response = listing(session_json("owner", pending="clarification"))
    assert ui.flow.settle(ticket, response, task).effects == ui.opened("owner")
    assert_inert(ui.flow.settle(ticket, response, task))


# -- phone sheets ---------------------------------------------------------------------------


@pytest.mark.scenario("S13")
@pytest.mark.parametrize("replacement_busy", [False, True])
def test_unmounted_sheet_continuation_cannot_touch_the_replacement(replacement_busy: bool) -> None:
    flow = ActivationFlow()
    flow.mount_sheet("phone-sheet")
    task = summary("clarification")
    old = flow.begin(task, surface="phone-sheet")
    assert flow.unmount_sheet("phone-sheet") == old.generation
    tablet = flow.mount_sheet("tablet-sheet")
    other = summary("clarification", task_id=OTHER_TASK)
    pending = flow.begin(other, surface="tablet-sheet") if replacement_busy else None

    decision = flow.settle(
        old, listing(session_json("owner", pending="clarification")), task, active_session_id="a"
    )
    assert_inert(decision)
    assert CloseSheet("tablet-sheet") not in decision.effects
    if pending is not None:
        assert tablet.owns(pending.generation)
        reply = listing(session_json("o2", pending="clarification", task_id=OTHER_TASK))
        assert flow.settle(pending, reply, other).effects == (
            OpenSession(OTHER_TASK, "o2"),
            CloseSheet("tablet-sheet"),
        )


def test_remounted_sheet_with_a_reused_id_ignores_old_tickets() -> None:
    flow = ActivationFlow()
    flow.mount_sheet("sheet")
    task = summary("clarification")
    old = flow.begin(task, surface="sheet")
    flow.unmount_sheet("sheet")
    flow.mount_sheet("sheet")
    new = flow.begin(task, surface="sheet")
    assert new.generation != old.generation
    response = listing(session_json("owner", pending="clarification"))
    assert_inert(flow.settle(old, response, task))
    assert flow.settle(new, response, task).effects == (
        OpenSession(TASK, "owner"),
        CloseSheet("sheet"),
    )
    with pytest.raises(KeyError):
        flow.begin(task, surface="never-mounted")
    with pytest.raises(ValueError):
        flow.mount_sheet(DESKTOP)


@pytest.mark.scenario("S43")
@pytest.mark.parametrize("action", ["close", "unmount", "select"])
def test_two_sheets_never_invalidate_each_other(action: str) -> None:
    flow = ActivationFlow()
    first = flow.mount_sheet("sheet-1")
    second = flow.mount_sheet("sheet-2")
    task_1, task_2 = summary("clarification"), summary("clarification", task_id=OTHER_TASK)
    ticket_1 = flow.begin(task_1, surface="sheet-1")
    ticket_2 = flow.begin(task_2, surface="sheet-2")
    assert ticket_1.supersedes == ticket_2.supersedes == ()

    if action == "close":
        flow.close_sheet("sheet-1")
    elif action == "unmount":
        flow.unmount_sheet("sheet-1")
    else:
        flow.begin(summary(None, task_id="task-3"), surface="sheet-1")
    assert not first.owns(ticket_1.generation)
    assert second.owns(ticket_2.generation)
    assert flow.is_current(ticket_2)

    stale = flow.settle(ticket_1, listing(session_json("o1", pending="clarification")), task_1)
    assert_inert(stale)
    reply = listing(session_json("o2", pending="clarification", task_id=OTHER_TASK))
    assert flow.settle(ticket_2, reply, task_2).effects == (
        OpenSession(OTHER_TASK, "o2"),
        CloseSheet("sheet-2"),
    )


@pytest.mark.scenario("S43")
def test_closing_one_sheet_after_the_other_settled_leaves_it_alone() -> None:
    flow = ActivationFlow()
    flow.mount_sheet("sheet-1")
    flow.mount_sheet("sheet-2")
    task = summary(None)
    ticket_2 = flow.begin(task, surface="sheet-2")
    ticket_1 = flow.begin(summary(None, task_id=OTHER_TASK), surface="sheet-1")
    assert flow.close_sheet("sheet-2") == ticket_2.generation
    assert flow.is_current(ticket_1)
    assert_inert(flow.settle(ticket_2, listing(session_json("x", primary=True)), task))


# -- purity ---------------------------------------------------------------------------------


def test_activation_package_does_not_import_reflex() -> None:
    """The Reflex layer wraps this package; the package itself must stay framework-free."""
    package = Path(__file__).resolve().parents[2] / "state" / "activation"
    modules = sorted(package.glob("*.py"))
    assert modules
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert name.split(".")[0] not in {"reflex", "backend"}, f"{path.name}: {name}"


def test_mounting_over_a_live_sheet_id_retires_the_previous_instance() -> None:
    flow = ActivationFlow()
    previous = flow.mount_sheet("sheet")
    task = summary("clarification")
    old = flow.begin(task, surface="sheet")
    flow.mount_sheet("sheet")
    assert previous.mounted is False
    assert_inert(flow.settle(old, listing(session_json("owner", pending="clarification")), task))
