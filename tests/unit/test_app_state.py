"""The thin Reflex layer around ``state.activation`` (``state.app_state.AppState``), without a
browser: the state is instantiated directly and its helper methods are called the way the
background handlers call them under the state lock. The decisions themselves are covered by
``test_activation.py``; here we check that the Reflex state feeds the flow the right inputs
(the task re-read after the forced load) and executes the decision's effects faithfully."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import reflex as rx

from backend.events import Event
from state.activation import (
    ClearActiveSession,
    CloseSheet,
    Decision,
    DecisionKind,
    OpenTaskRoute,
    Reason,
    ReleaseLayout,
)
from state.app_state import AppState, EventReads
from state.gateway import ActivationLoad

TASK = "t1"


def new_state() -> AppState:
    root = rx.State(_reflex_internal_init=True)
    return root.get_substate(AppState.get_full_name().split(".")[1:])


def task_json(pending: str | None = "clarification", revision: int = 3) -> dict[str, Any]:
    return {
        "id": TASK,
        "title": "Fix the login loop",
        "workspace_id": "ws",
        "workflow_id": "wf",
        "workflow_step_id": "st",
        "state": "IN_PROGRESS",
        "status_summary": {
            "revision": revision,
            "pending_action": pending,
            "primary_session_id": "primary",
        },
    }


def sessions_json(owner_pending: str | None = "clarification", sequence: int = 5) -> dict[str, Any]:
    revision = {"epoch": "1", "sequence": sequence}
    return {
        "sessions": [
            {
                "id": "primary",
                "task_id": TASK,
                "state": "IDLE",
                "is_primary": True,
                "input_capable": True,
                "pending_action": None,
                "pending_action_revision": revision,
                "created_at": "2026-01-01T10:00:00Z",
            },
            {
                "id": "secondary",
                "task_id": TASK,
                "state": "WAITING_FOR_INPUT",
                "is_primary": False,
                "input_capable": True,
                "pending_action": owner_pending,
                "pending_action_revision": revision,
                "created_at": "2026-01-01T10:05:00Z",
            },
        ]
    }


def booted(pending: str | None = "clarification") -> AppState:
    state = new_state()
    state._apply_boot(
        {"epoch": "1", "workspaces": [], "workflows": [], "tasks": [task_json(pending)]}
    )
    return state


@pytest.mark.scenario("S09")
def test_pending_task_opens_the_secondary_owner_and_remembers_it() -> None:
    state = booted()
    state._remembered = {TASK: "primary"}
    ticket = state._begin_activation(TASK, "desktop")
    assert ticket is not None and ticket.force  # a pending task bypasses the session cache
    assert state.activating_task_id == TASK

    opened = state._settle_activation(ticket, ActivationLoad(sessions_json(), task_json()), None)

    assert opened is not None and opened.path == f"/tasks/{TASK}/sessions/secondary"
    assert (state.active_task_id, state.active_session_id) == (TASK, "secondary")
    assert state._remembered[TASK] == "secondary"
    assert state._expect_path == opened.path
    assert [t.id for t in state.tabs] == ["primary", "secondary"]
    assert [t.pending_action for t in state.tabs] == ["", "clarification"]


@pytest.mark.scenario("S11")
def test_summary_changed_on_the_server_opens_the_task_route_and_closes_the_sheet() -> None:
    state = booted()
    sheet = "sheet-1"
    state._activation().mount_sheet(sheet)
    ticket = state._begin_activation(TASK, sheet)
    assert ticket is not None
    closed: list[str] = []
    # The task re-read after the forced load: the question was answered meanwhile.
    load = ActivationLoad(sessions_json(owner_pending=None, sequence=6), task_json(None, 4))

    opened = state._settle_activation(ticket, load, closed.append)

    assert opened is not None and opened.path == f"/tasks/{TASK}"
    assert state.active_session_id == "" and state.active_task_id == TASK
    assert closed == [sheet]
    assert state.rows[0].pending_action == ""  # the newer summary reached the sidebar


@pytest.mark.scenario("S41")
def test_task_gone_mid_load_changes_no_selection() -> None:
    state = booted()
    state.active_task_id, state.active_session_id = "other", "other-session"
    ticket = state._begin_activation(TASK, "desktop")
    assert ticket is not None

    opened = state._settle_activation(ticket, ActivationLoad(sessions_json(), None), None)

    assert opened is None
    assert (state.active_task_id, state.active_session_id) == ("other", "other-session")
    assert state.rows == []  # the vanished task left the sidebar


@pytest.mark.scenario("S42")
def test_aborted_older_load_is_inert_and_the_newer_one_wins() -> None:
    state = booted()
    older = state._begin_activation(TASK, "desktop")
    newer = state._begin_activation(TASK, "desktop")
    assert older is not None and newer is not None
    assert older.generation in newer.supersedes

    opened = state._settle_activation(newer, ActivationLoad(sessions_json(), task_json()), None)
    assert opened is not None and state.active_session_id == "secondary"
    assert state._settle_activation(older, asyncio.CancelledError(), None) is None
    assert state.active_session_id == "secondary"


@pytest.mark.scenario("S14")
def test_task_route_effects_release_the_layout_before_clearing_the_session() -> None:
    state = booted()
    state.active_task_id, state.active_session_id = TASK, "secondary"
    state._messages = [{"id": "m1"}]
    state._bundles = [{"pending_id": "p1", "questions": []}]
    generation = state._view_gen
    decision = Decision(
        DecisionKind.OPEN_TASK,
        TASK,
        Reason.NO_PENDING_OWNER,
        (ReleaseLayout("secondary"), ClearActiveSession(), OpenTaskRoute(TASK), CloseSheet("s")),
    )
    closed: list[str] = []

    opened = state._run_effects(decision, closed.append)

    assert state._view_gen == generation + 1  # late reads of the old layout are dropped
    assert state._messages == [] and state._bundles == [] and state.questions == []
    assert state.active_session_id == ""
    assert opened is not None and opened.path == f"/tasks/{TASK}"
    assert closed == ["s"]


def test_late_session_view_of_a_released_layout_is_dropped() -> None:
    state = booted()
    view = state._open_session(TASK, "secondary")
    state._open_session(TASK, "primary")
    state._apply_session_view(view, [{"id": "m1", "type": "message", "author": "agent"}], [])
    assert state.messages == [] and state.view_loading


@pytest.mark.scenario("S05")
def test_question_event_advances_the_projection_before_discovery() -> None:
    state = booted(pending=None)
    state._set_tab_sessions(TASK, sessions_json(owner_pending=None))
    state._open_session(TASK, "secondary")
    message = {
        "id": "q1",
        "session_id": "secondary",
        "turn_id": "u1",
        "type": "clarification_request",
        "author": "agent",
        "content": "Which DB?",
        "metadata": {"pending_id": "p1", "status": "pending", "question": "Which DB?"},
        "created_at": "2026-01-01T10:06:00Z",
    }
    event = Event(
        "session.message.added",
        {
            "session_id": "secondary",
            "task_id": TASK,
            "message": message,
            "pending_action": "clarification",
            "pending_action_revision": {"epoch": "1", "sequence": 9},
        },
    )

    plan, _ = state._apply_events([event])

    assert plan.discover_bundles
    assert state._activation().projections.pending_action("secondary") == "clarification"
    assert [t.pending_action for t in state.tabs] == ["", "clarification"]
    assert [m.id for m in state.messages] == ["q1"]


@pytest.mark.scenario("S06")
def test_older_list_cannot_replace_a_newer_event_projection() -> None:
    state = booted(pending=None)
    state._set_tab_sessions(TASK, sessions_json(owner_pending=None, sequence=5))
    newer = Event(
        "session.message.added",
        {
            "session_id": "secondary",
            "task_id": TASK,
            "message": {"id": "q1", "type": "clarification_request"},
            "pending_action": "clarification",
            "pending_action_revision": {"epoch": "1", "sequence": 9},
        },
    )
    state._apply_events([newer])
    state._set_tab_sessions(TASK, sessions_json(owner_pending=None, sequence=7))  # late REST
    assert state._activation().projections.pending_action("secondary") == "clarification"


@pytest.mark.scenario("S33")
def test_a_session_updated_event_moves_the_projection_to_clean() -> None:
    """A terminal state whose expiry could not run is announced by ``session.updated``
    with its revisioned projection: the held ``clarification`` goes, an older one cannot
    come back, and an event omitting the field keeps the held value."""
    state = booted(pending=None)
    state._set_tab_sessions(TASK, sessions_json(owner_pending="clarification", sequence=5))
    projections = state._activation().projections
    assert projections.pending_action("secondary") == "clarification"
    clean = {"session_id": "secondary", "task_id": TASK, "pending_action": None}
    state._apply_events(
        [
            Event(
                "session.updated",
                {**clean, "pending_action_revision": {"epoch": "1", "sequence": 8}},
            )
        ]
    )
    assert projections.pending_action("secondary") is None
    state._apply_events([Event("session.updated", {"session_id": "secondary", "task_id": TASK})])
    state._set_tab_sessions(TASK, sessions_json(owner_pending="clarification", sequence=7))
    assert projections.pending_action("secondary") is None


def test_summary_events_update_rows_only_when_newer() -> None:
    state = booted()
    older = Event(
        "task.status_summary.updated",
        {"task_id": TASK, "status_summary": {"revision": 2, "pending_action": None}},
    )
    state._apply_events([older])
    assert state.rows[0].pending_action == "clarification"
    newer = Event(
        "task.status_summary.updated",
        {"task_id": TASK, "status_summary": {"revision": 4, "pending_action": None}},
    )
    state._apply_events([newer])
    assert state.rows[0].pending_action == ""


def test_a_late_older_session_list_does_not_bring_back_a_busy_state() -> None:
    state = booted()
    state._select_task(TASK)
    newer = sessions_json(sequence=9)
    older = sessions_json(sequence=4)
    older["sessions"][1]["state"] = "RUNNING"
    state._set_tab_sessions(TASK, newer)
    state._set_tab_sessions(TASK, older)  # e.g. a handler's read that started earlier
    assert [t.state for t in state.tabs] == ["IDLE", "WAITING_FOR_INPUT"]


def question_message(message_id: str, created: str = "2026-01-01T10:06:00Z") -> dict[str, Any]:
    return {
        "id": message_id,
        "session_id": "secondary",
        "turn_id": "u1",
        "type": "message",
        "author": "agent",
        "content": f"reply {message_id}",
        "metadata": {},
        "created_at": created,
    }


def opened_secondary() -> AppState:
    state = booted()
    state._set_tab_sessions(TASK, sessions_json())
    state._open_session(TASK, "secondary")
    return state


def test_a_message_arriving_during_a_transcript_read_is_not_lost() -> None:
    state = opened_secondary()
    view = state._view()  # the read begins
    arrived = Event(
        "session.message.added",
        {"session_id": "secondary", "task_id": TASK, "message": question_message("m2")},
    )
    state._apply_events([arrived])
    # The read (begun before m2 existed) finishes last.
    state._apply_session_view(view, [question_message("m1", "2026-01-01T10:05:00Z")], [])
    assert [m.id for m in state.messages] == ["m1", "m2"]


def test_a_bundle_read_older_than_a_discovery_event_is_dropped() -> None:
    state = opened_secondary()
    bundle = {"pending_id": "p1", "session_id": "secondary", "questions": []}
    view = state._view()  # a bundle read begins while the question is still active
    answered = Event(
        "session.message.updated",
        {
            "session_id": "secondary",
            "task_id": TASK,
            "message": {**question_message("q1"), "type": "clarification_request"},
            "pending_action": None,
            "pending_action_revision": {"epoch": "1", "sequence": 20},
        },
    )
    plan, newer_view = state._apply_events([answered])
    assert plan.discover_bundles
    state._apply_session_view(view, [], [bundle])  # stale: would revive the overlay
    assert state._bundles == []
    state._apply_session_view(newer_view, [], [])  # the discovery read the event asked for
    assert state._bundles == [] and not state.has_bundle


def test_a_deleted_task_leaves_the_rows_and_the_open_view() -> None:
    state = opened_secondary()
    state._messages = [question_message("m1")]
    plan, view = state._apply_events([Event("task.deleted", {"task_id": TASK})])
    assert plan.reload_tasks == {TASK} and TASK in plan.stale_session_lists
    assert state.rows  # the event alone is not truth: the re-read decides

    state._apply_reads(plan, view, EventReads(tasks={}))  # the read no longer finds it

    assert state.rows == [] and state.groups == []
    assert (state.active_task_id, state.active_session_id) == (TASK, "")
    assert state.tabs == [] and state.messages == [] and state._tab_sessions == []
    assert TASK not in state._session_cache


def test_a_deleted_task_event_for_a_task_that_still_exists_changes_nothing() -> None:
    state = opened_secondary()
    plan, view = state._apply_events([Event("task.deleted", {"task_id": TASK})])
    state._apply_reads(plan, view, EventReads(tasks={TASK: task_json()}))
    assert [r.id for r in state.rows] == [TASK]
    assert state.active_session_id == "secondary"
