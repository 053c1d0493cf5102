"""The Reflex layer around ``state.activation`` (``state.workspace.Workspace`` over the panel
substates), without a browser: the state tree is instantiated directly and the workspace's
methods are called the way the background handlers call them under the state lock. The
decisions themselves are covered by ``test_activation.py``; here we check that the Reflex
state feeds the flow the right inputs (the task re-read after the forced load) and executes
the decision's effects faithfully."""

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
from state.app_state import AppState
from state.gateway import ActivationLoad
from state.workspace import EventReads, Workspace

TASK = "t1"


def new_state() -> Workspace:
    """A fresh tab: every panel is in the tree, so ``Workspace.of`` needs no state manager."""
    root = rx.State(_reflex_internal_init=True)
    app = root.get_substate(AppState.get_full_name().split(".")[1:])
    return asyncio.run(Workspace.of(app))


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


def booted(pending: str | None = "clarification") -> Workspace:
    state = new_state()
    state.apply_boot(
        {"epoch": "1", "workspaces": [], "workflows": [], "tasks": [task_json(pending)]}
    )
    return state


@pytest.mark.scenario("S09")
def test_pending_task_opens_the_secondary_owner_and_remembers_it() -> None:
    state = booted()
    state.app._remembered = {TASK: "primary"}
    ticket = state.begin_activation(TASK, "desktop")
    assert ticket is not None and ticket.force  # a pending task bypasses the session cache
    assert state.app.activating_task_id == TASK

    opened = state.settle_activation(ticket, ActivationLoad(sessions_json(), task_json()), None)

    assert opened is not None and opened.path == f"/tasks/{TASK}/sessions/secondary"
    assert (state.app.active_task_id, state.app.active_session_id) == (TASK, "secondary")
    assert state.app._remembered[TASK] == "secondary"
    assert state.app._expect_path == opened.path
    assert [t.id for t in state.view.tabs] == ["primary", "secondary"]
    assert [t.pending_action for t in state.view.tabs] == ["", "clarification"]


@pytest.mark.scenario("S11")
def test_summary_changed_on_the_server_opens_the_task_route_and_closes_the_sheet() -> None:
    state = booted()
    sheet = "sheet-1"
    state.app.activation().mount_sheet(sheet)
    ticket = state.begin_activation(TASK, sheet)
    assert ticket is not None
    closed: list[str] = []
    # The task re-read after the forced load: the question was answered meanwhile.
    load = ActivationLoad(sessions_json(owner_pending=None, sequence=6), task_json(None, 4))

    opened = state.settle_activation(ticket, load, closed.append)

    assert opened is not None and opened.path == f"/tasks/{TASK}"
    assert state.app.active_session_id == "" and state.app.active_task_id == TASK
    assert closed == [sheet]
    assert state.app.rows[0].pending_action == ""  # the newer summary reached the sidebar


@pytest.mark.scenario("S41")
def test_task_gone_mid_load_changes_no_selection() -> None:
    state = booted()
    state.app.active_task_id, state.app.active_session_id = "other", "other-session"
    ticket = state.begin_activation(TASK, "desktop")
    assert ticket is not None

    opened = state.settle_activation(ticket, ActivationLoad(sessions_json(), None), None)

    assert opened is None
    assert (state.app.active_task_id, state.app.active_session_id) == ("other", "other-session")
    assert state.app.rows == []  # the vanished task left the sidebar


@pytest.mark.scenario("S42")
def test_aborted_older_load_is_inert_and_the_newer_one_wins() -> None:
    state = booted()
    older = state.begin_activation(TASK, "desktop")
    newer = state.begin_activation(TASK, "desktop")
    assert older is not None and newer is not None
    assert older.generation in newer.supersedes

    opened = state.settle_activation(newer, ActivationLoad(sessions_json(), task_json()), None)
    assert opened is not None and state.app.active_session_id == "secondary"
    assert state.settle_activation(older, asyncio.CancelledError(), None) is None
    assert state.app.active_session_id == "secondary"


@pytest.mark.scenario("S14")
def test_task_route_effects_release_the_layout_before_clearing_the_session() -> None:
    state = booted()
    state.app.active_task_id, state.app.active_session_id = TASK, "secondary"
    state.view._messages = [{"id": "m1"}]
    state.view._bundles = [{"pending_id": "p1", "questions": []}]
    generation = state.view._view_gen
    decision = Decision(
        DecisionKind.OPEN_TASK,
        TASK,
        Reason.NO_PENDING_OWNER,
        (ReleaseLayout("secondary"), ClearActiveSession(), OpenTaskRoute(TASK), CloseSheet("s")),
    )
    closed: list[str] = []

    opened = state.run_effects(decision, closed.append)

    assert state.view._view_gen == generation + 1  # late reads of the old layout are dropped
    assert (
        state.view._messages == [] and state.view._bundles == [] and state.overlay.questions == []
    )
    assert state.app.active_session_id == ""
    assert opened is not None and opened.path == f"/tasks/{TASK}"
    assert closed == ["s"]


def test_late_session_view_of_a_released_layout_is_dropped() -> None:
    state = booted()
    view = state.open_session(TASK, "secondary")
    state.open_session(TASK, "primary")
    state.apply_session_view(view, [{"id": "m1", "type": "message", "author": "agent"}], [])
    assert state.view.messages == [] and state.view.view_loading


@pytest.mark.scenario("S05")
def test_question_event_advances_the_projection_before_discovery() -> None:
    state = booted(pending=None)
    state.set_tab_sessions(TASK, sessions_json(owner_pending=None))
    state.open_session(TASK, "secondary")
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

    plan, _ = state.apply_events([event])

    assert plan.discover_bundles
    assert state.app.activation().projections.pending_action("secondary") == "clarification"
    assert [t.pending_action for t in state.view.tabs] == ["", "clarification"]
    assert [m.id for m in state.view.messages] == ["q1"]


@pytest.mark.scenario("S06")
def test_older_list_cannot_replace_a_newer_event_projection() -> None:
    state = booted(pending=None)
    state.set_tab_sessions(TASK, sessions_json(owner_pending=None, sequence=5))
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
    state.apply_events([newer])
    state.set_tab_sessions(TASK, sessions_json(owner_pending=None, sequence=7))  # late REST
    assert state.app.activation().projections.pending_action("secondary") == "clarification"


@pytest.mark.scenario("S33")
def test_a_session_updated_event_moves_the_projection_to_clean() -> None:
    """A terminal state whose expiry could not run is announced by ``session.updated``
    with its revisioned projection: the held ``clarification`` goes, an older one cannot
    come back, and an event omitting the field keeps the held value."""
    state = booted(pending=None)
    state.set_tab_sessions(TASK, sessions_json(owner_pending="clarification", sequence=5))
    projections = state.app.activation().projections
    assert projections.pending_action("secondary") == "clarification"
    clean = {"session_id": "secondary", "task_id": TASK, "pending_action": None}
    state.apply_events(
        [
            Event(
                "session.updated",
                {**clean, "pending_action_revision": {"epoch": "1", "sequence": 8}},
            )
        ]
    )
    assert projections.pending_action("secondary") is None
    state.apply_events([Event("session.updated", {"session_id": "secondary", "task_id": TASK})])
    state.set_tab_sessions(TASK, sessions_json(owner_pending="clarification", sequence=7))
    assert projections.pending_action("secondary") is None


def test_summary_events_update_rows_only_when_newer() -> None:
    state = booted()
    older = Event(
        "task.status_summary.updated",
        {"task_id": TASK, "status_summary": {"revision": 2, "pending_action": None}},
    )
    state.apply_events([older])
    assert state.app.rows[0].pending_action == "clarification"
    newer = Event(
        "task.status_summary.updated",
        {"task_id": TASK, "status_summary": {"revision": 4, "pending_action": None}},
    )
    state.apply_events([newer])
    assert state.app.rows[0].pending_action == ""


def test_a_late_older_session_list_does_not_bring_back_a_busy_state() -> None:
    state = booted()
    state.select_task(TASK)
    newer = sessions_json(sequence=9)
    older = sessions_json(sequence=4)
    older["sessions"][1]["state"] = "RUNNING"
    state.set_tab_sessions(TASK, newer)
    state.set_tab_sessions(TASK, older)  # e.g. a handler's read that started earlier
    assert [t.state for t in state.view.tabs] == ["IDLE", "WAITING_FOR_INPUT"]


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


def opened_secondary() -> Workspace:
    state = booted()
    state.set_tab_sessions(TASK, sessions_json())
    state.open_session(TASK, "secondary")
    return state


def test_a_message_arriving_during_a_transcript_read_is_not_lost() -> None:
    state = opened_secondary()
    view = state.view.view_ref()  # the read begins
    arrived = Event(
        "session.message.added",
        {"session_id": "secondary", "task_id": TASK, "message": question_message("m2")},
    )
    state.apply_events([arrived])
    # The read (begun before m2 existed) finishes last.
    state.apply_session_view(view, [question_message("m1", "2026-01-01T10:05:00Z")], [])
    assert [m.id for m in state.view.messages] == ["m1", "m2"]


def test_a_bundle_read_older_than_a_discovery_event_is_dropped() -> None:
    state = opened_secondary()
    bundle = {"pending_id": "p1", "session_id": "secondary", "questions": []}
    view = state.view.view_ref()  # a bundle read begins while the question is still active
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
    plan, newer_view = state.apply_events([answered])
    assert plan.discover_bundles
    state.apply_session_view(view, [], [bundle])  # stale: would revive the overlay
    assert state.view._bundles == []
    state.apply_session_view(newer_view, [], [])  # the discovery read the event asked for
    assert state.view._bundles == [] and not state.overlay.has_bundle


def test_a_deleted_task_leaves_the_rows_and_the_open_view() -> None:
    state = opened_secondary()
    state.view._messages = [question_message("m1")]
    plan, view = state.apply_events([Event("task.deleted", {"task_id": TASK})])
    assert plan.reload_tasks == {TASK} and TASK in plan.stale_session_lists
    assert state.app.rows  # the event alone is not truth: the re-read decides

    state.apply_reads(plan, view, EventReads(tasks={}))  # the read no longer finds it

    assert state.app.rows == [] and state.tasks.groups == []
    assert (state.app.active_task_id, state.app.active_session_id) == (TASK, "")
    assert state.view.tabs == [] and state.view.messages == [] and state.view._tab_sessions == []
    assert TASK not in state.view._session_cache


def test_a_deleted_task_event_for_a_task_that_still_exists_changes_nothing() -> None:
    state = opened_secondary()
    plan, view = state.apply_events([Event("task.deleted", {"task_id": TASK})])
    state.apply_reads(plan, view, EventReads(tasks={TASK: task_json()}))
    assert [r.id for r in state.app.rows] == [TASK]
    assert state.app.active_session_id == "secondary"


@pytest.mark.scenario("S13")
def test_a_sheet_that_left_the_page_can_neither_navigate_nor_close() -> None:
    state = booted()
    state.app.mount_sheet("sheet-1")
    ticket = state.begin_activation(TASK, "sheet-1")
    assert ticket is not None
    state.app.leave_sheet("sheet-1", unmounted=True)
    closed: list[str] = []

    load = ActivationLoad(sessions_json(), task_json())
    assert state.settle_activation(ticket, load, closed.append) is None

    assert (state.app.active_task_id, state.app.active_session_id) == ("", "")
    assert closed == [] and state.app._expect_path == ""


def test_panels_derive_from_the_roots_payloads() -> None:
    """Rows, groups, board columns and the active task are cached ``@rx.var``s of the
    payloads: a stored task reaches every panel without a render call."""
    state = booted(pending=None)
    state.app.active_task_id = TASK
    assert state.app.active_task.id == TASK and state.tasks.pending_count == 0
    state.app.store_tasks({TASK: task_json("clarification", revision=9)})
    assert state.app.active_task.pending_action == "clarification"
    assert state.tasks.pending_count == 1
    assert [r.id for g in state.tasks.groups for r in g.tasks] == [TASK]
    state.app.store_tasks({TASK: None})
    assert state.app.active_task.id == "" and state.tasks.groups == []
