"""Pure helpers of the workspace UI (``state.ui_models``): routes, rows, tabs, transcript
kinds, overlay answers, summary merging and what a live event makes the client re-read."""

from __future__ import annotations

from typing import Any

import pytest

from state.ui_models import (
    AGENT,
    BOARD,
    HOME,
    PERMISSION,
    QUESTION,
    SESSION,
    STATUS,
    TASK,
    USER,
    EventPlan,
    Route,
    answers_payload,
    apply_summary,
    board_columns,
    choose_option,
    first_unanswered,
    invalidate_summary,
    is_board_move,
    is_newer_list,
    list_revision,
    merge_task,
    message_item,
    parse_route,
    plan_event,
    question_items,
    remove_message,
    session_path,
    session_tabs,
    set_answer_text,
    step_groups,
    task_path,
    task_rows,
    transcript_order,
    upsert_message,
    workflow_items,
    workspace_items,
)

BOOT: dict[str, Any] = {
    "epoch": "3",
    "workspaces": [{"id": "ws-b", "name": "Platform"}, {"id": "ws-a", "name": "Acme"}],
    "workflows": [
        {
            "id": "wf-a",
            "workspace_id": "ws-a",
            "name": "Default",
            "steps": [
                {"id": "a-done", "name": "Done", "position": 1},
                {"id": "a-todo", "name": "Backlog", "position": 0},
            ],
        },
        {
            "id": "wf-b",
            "workspace_id": "ws-b",
            "name": "Default",
            "steps": [{"id": "b-todo", "name": "Backlog", "position": 0}],
        },
    ],
}


def task(
    task_id: str,
    *,
    step: str = "a-todo",
    workflow: str = "wf-a",
    pending: str | None = None,
    revision: int | None = 1,
    state: str = "TODO",
) -> dict[str, Any]:
    summary = (
        None
        if revision is None
        else {"revision": revision, "pending_action": pending, "primary_session_id": None}
    )
    return {
        "id": task_id,
        "title": f"Task {task_id}",
        "workspace_id": "ws-a" if workflow == "wf-a" else "ws-b",
        "workflow_id": workflow,
        "workflow_step_id": step,
        "state": state,
        "status_summary": summary,
    }


# -- routes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "route"),
    [
        ("/", Route(HOME)),
        ("", Route(HOME)),
        ("/board", Route(BOARD)),
        ("/board/", Route(BOARD)),
        ("/tasks/t1", Route(TASK, "t1")),
        ("/tasks/t1/", Route(TASK, "t1")),
        ("/tasks/t1/sessions/s1", Route(SESSION, "t1", "s1")),
        ("/tasks/t1/sessions/s1?x=1#y", Route(SESSION, "t1", "s1")),
        ("/tasks/", Route(HOME)),
        ("/elsewhere", Route(HOME)),
    ],
)
def test_parse_route(path: str, route: Route) -> None:
    assert parse_route(path) == route


def test_paths_round_trip() -> None:
    assert parse_route(task_path("t9")) == Route(TASK, "t9")
    assert parse_route(session_path("t9", "s2")) == Route(SESSION, "t9", "s2")


# -- tasks, groups, board --------------------------------------------------------------------


def test_workflows_sorted_by_workspace_with_steps_in_position_order() -> None:
    items = workflow_items(BOOT)
    assert [w.workspace_name for w in items] == ["Acme", "Platform"]
    assert [s.name for s in items[0].steps] == ["Backlog", "Done"]


def test_workspaces_for_new_tasks_are_listed_once_by_name() -> None:
    assert [(w.id, w.name) for w in workspace_items(BOOT)] == [
        ("ws-a", "Acme"),
        ("ws-b", "Platform"),
    ]


def test_rows_carry_step_workspace_and_the_summary_pending_action() -> None:
    workflows = workflow_items(BOOT)
    rows = task_rows(
        [task("t1", pending="clarification"), task("t2", step="a-done", state="DONE")], workflows
    )
    assert (rows[0].step_name, rows[0].workspace_name, rows[0].pending_action) == (
        "Backlog",
        "Acme",
        "clarification",
    )
    assert rows[0].pending_hint.startswith("The agent asked")
    assert (rows[1].step_name, rows[1].state_label, rows[1].state_color) == (
        "Done",
        "Done",
        "green",
    )
    assert rows[1].pending_action == ""


def test_legacy_row_without_summary_uses_the_top_level_pending_action() -> None:
    legacy = {**task("t1", revision=None), "pending_action": "permission"}
    (row,) = task_rows([legacy], workflow_items(BOOT))
    assert row.pending_action == "permission"
    (clean,) = task_rows([task("t2", revision=None)], workflow_items(BOOT))
    assert clean.pending_action == ""


def test_step_groups_merge_same_named_steps_across_workspaces_in_workflow_order() -> None:
    rows = task_rows(
        [
            task("t1", step="a-done"),
            task("t2", step="b-todo", workflow="wf-b"),
            task("t3", step="a-todo"),
        ],
        workflow_items(BOOT),
    )
    groups = step_groups(rows)
    assert [(g.name, [t.id for t in g.tasks]) for g in groups] == [
        ("Backlog", ["t2", "t3"]),
        ("Done", ["t1"]),
    ]


def test_board_columns_list_every_step_and_the_other_steps_as_move_targets() -> None:
    workflows = workflow_items(BOOT)
    rows = task_rows([task("t1"), task("t2", step="b-todo", workflow="wf-b")], workflows)
    columns = board_columns(workflows[0], rows)
    assert [(c.name, [t.id for t in c.tasks]) for c in columns] == [
        ("Backlog", ["t1"]),
        ("Done", []),
    ]
    assert [s.id for s in columns[0].targets] == ["a-done"]
    assert board_columns(None, rows) == []


def test_a_dropped_card_is_a_move_only_onto_another_column_of_its_board() -> None:
    workflows = workflow_items(BOOT)
    rows = task_rows([task("t1"), task("t2", step="b-todo", workflow="wf-b")], workflows)
    columns = board_columns(workflows[0], rows)
    assert is_board_move(columns, "t1", "a-done")
    assert not is_board_move(columns, "t1", "a-todo"), "its own column: no move"
    assert not is_board_move(columns, "t1", "b-todo"), "a step of another workflow"
    assert not is_board_move(columns, "t2", "a-done"), "a card of another board"
    assert not is_board_move(columns, "", "a-done"), "a drop that carried no card"
    assert not is_board_move(columns, "t1", ""), "a drop outside any column"


# -- summaries only move forward -------------------------------------------------------------


def test_live_summary_applies_only_when_newer() -> None:
    held = task("t1", revision=4)
    newer = apply_summary(held, {"revision": 5, "pending_action": "clarification"})
    assert newer is not None and newer["status_summary"]["pending_action"] == "clarification"
    assert apply_summary(held, {"revision": 4, "pending_action": "clarification"}) is None
    assert apply_summary(held, {"revision": 3, "pending_action": None}) is None
    assert apply_summary(None, {"revision": 9}) is None
    assert apply_summary(held, {"revision": "9"}) is None


def test_read_result_older_than_the_held_summary_keeps_the_held_one() -> None:
    held = task("t1", revision=7, pending="clarification")
    stale_read = task("t1", revision=6, pending=None)
    merged = merge_task(held, stale_read)
    assert merged["status_summary"]["revision"] == 7
    assert merge_task(held, task("t1", revision=8))["status_summary"]["revision"] == 8


def test_invalidating_read_clears_the_summary_unless_a_newer_one_arrived_meanwhile() -> None:
    held = task("t1", revision=7, pending="clarification")
    invalid_read = task("t1", revision=None)
    assert merge_task(held, invalid_read, revision_at_read=7)["status_summary"] is None
    # A live summary (revision 8) arrived while the read (begun at 7) was in flight.
    newer = task("t1", revision=8, pending=None)
    assert merge_task(newer, invalid_read, revision_at_read=7)["status_summary"]["revision"] == 8


def test_invalidation_event_drops_the_held_summary() -> None:
    dropped = invalidate_summary(task("t1", revision=3))
    assert dropped is not None and dropped["status_summary"] is None
    assert invalidate_summary(task("t1", revision=None)) is None
    assert invalidate_summary(None) is None


def test_invalidation_event_cannot_erase_a_newer_live_summary() -> None:
    # The server gave up repairing revision 5; a live summary at 6 already overtook it.
    assert invalidate_summary(task("t1", revision=6), stale_revision=5) is None
    # The held summary is the stale one (or older): it goes.
    for held in (5, 4):
        dropped = invalidate_summary(task("t1", revision=held), stale_revision=5)
        assert dropped is not None and dropped["status_summary"] is None
    # A malformed stale_revision cannot protect anything: drop, and the next read decides.
    dropped = invalidate_summary(task("t1", revision=6), stale_revision="6")
    assert dropped is not None and dropped["status_summary"] is None


# -- sessions --------------------------------------------------------------------------------


def session(
    session_id: str, created: str, *, primary: bool = False, pending: str | None = None
) -> dict[str, Any]:
    return {
        "id": session_id,
        "task_id": "t1",
        "state": "WAITING_FOR_INPUT" if pending else "IDLE",
        "is_primary": primary,
        "pending_action": pending,
        "created_at": created,
    }


def test_tabs_in_creation_order_with_projection_values_winning() -> None:
    sessions = [
        session("s2", "2026-01-01T10:05:00Z", pending="clarification"),
        session("s1", "2026-01-01T10:00:00Z", primary=True),
    ]
    tabs = session_tabs(sessions, {})
    assert [(t.id, t.label, t.pending_action) for t in tabs] == [
        ("s1", "Primary", ""),
        ("s2", "Session 2", "clarification"),
    ]
    assert tabs[1].state_label == "Needs input"
    # The projection store's newer value (e.g. from an event) wins over the list's.
    tabs = session_tabs(sessions, {"s2": None, "s1": "clarification"})
    assert [t.pending_action for t in tabs] == ["clarification", ""]


def stamped(state: str, epoch: str, sequence: int) -> dict[str, Any]:
    row = session("s1", "2026-01-01T10:00:00Z")
    return {
        **row,
        "state": state,
        "pending_action_revision": {"epoch": epoch, "sequence": sequence},
    }


def test_an_older_session_list_cannot_replace_a_newer_one() -> None:
    running, idle = [stamped("RUNNING", "2", 4)], [stamped("IDLE", "2", 9)]
    assert list_revision(idle) is not None and list_revision([]) is None
    assert is_newer_list(running, idle)
    assert not is_newer_list(idle, running)  # the late read of a busy session
    assert is_newer_list(idle, idle)
    assert is_newer_list(idle, [stamped("RUNNING", "3", 1)])  # a newer backend generation
    assert is_newer_list([], running)
    assert not is_newer_list(idle, [])  # sessions are never deleted


# -- transcript kinds ------------------------------------------------------------------------


def message(
    message_id: str,
    mtype: str = "message",
    author: str = "agent",
    content: str = "hi",
    created: str = "2026-01-01T10:00:00Z",
    **meta: Any,
) -> dict[str, Any]:
    return {
        "id": message_id,
        "session_id": "s1",
        "turn_id": "u1",
        "type": mtype,
        "author": author,
        "content": content,
        "metadata": meta,
        "created_at": created,
    }


def test_plain_messages_render_by_author() -> None:
    assert message_item(message("m1", author="user"), frozenset()).kind == USER
    assert message_item(message("m2", author="agent"), frozenset()).kind == AGENT
    assert message_item(message("m3", author="system"), frozenset()).kind == STATUS
    assert message_item(message("m4", mtype="status", author="agent"), frozenset()).kind == STATUS


def test_question_in_an_active_bundle_waits_and_a_superseded_one_does_not() -> None:
    row = message(
        "q1",
        "clarification_request",
        content="fallback text",
        pending_id="p1",
        status="pending",
        question="Which DB?",
        options=[{"id": "o1", "label": "SQLite"}, {"id": "o2", "label": "PostgreSQL"}],
    )
    active = message_item(row, frozenset({"p1"}))
    assert (active.kind, active.content, active.detail) == (
        QUESTION,
        "Which DB?",
        "SQLite · PostgreSQL",
    )
    assert (active.waiting, active.status_label, active.status_color) == (
        True,
        "Waiting for you",
        "amber",
    )
    # Pending status alone proves nothing: an inactive bundle is history.
    stale = message_item(row, frozenset({"p2"}))
    assert (stale.waiting, stale.status_label) == (False, "No longer active")


@pytest.mark.parametrize(
    ("status", "label"),
    [
        ("answered", "Answered"),
        ("rejected", "Skipped"),
        ("expired", "Expired"),
        ("cancelled", "Cancelled"),
    ],
)
def test_terminal_questions_show_their_outcome(status: str, label: str) -> None:
    row = message(
        "q1",
        "clarification_request",
        pending_id="p1",
        status=status,
        question="Which DB?",
        answer={"option_labels": ["SQLite"], "text": " keep it small "},
    )
    item = message_item(row, frozenset({"p1"}))
    assert (item.status_label, item.waiting) == (label, False)
    assert item.answer == "SQLite, keep it small"


def test_missing_status_counts_as_pending_but_only_an_active_bundle_waits() -> None:
    row = message("q1", "clarification_request", pending_id="p1", question="Q?")
    assert message_item(row, frozenset({"p1"})).waiting
    assert not message_item(row, frozenset()).waiting


def test_permission_waits_only_while_the_session_projection_says_permission() -> None:
    row = message("r1", "permission_request", content="May I?", pending_id="p9", status="pending")
    assert message_item(row, frozenset()).kind == PERMISSION
    assert not message_item(row, frozenset()).waiting
    assert message_item(row, frozenset(), permission_pending=True).waiting


def test_transcript_upsert_replaces_by_id_and_keeps_order() -> None:
    first = message("m1", created="2026-01-01T10:00:00Z")
    second = message("m2", created="2026-01-01T10:01:00Z")
    rows = upsert_message([second], first)
    assert [m["id"] for m in rows] == ["m1", "m2"]
    edited = {**first, "content": "edited"}
    rows = upsert_message(rows, edited)
    assert [(m["id"], m["content"]) for m in rows] == [("m1", "edited"), ("m2", "hi")]
    assert [m["id"] for m in remove_message(rows, "m1")] == ["m2"]


def test_questions_of_one_bundle_keep_the_agents_order() -> None:
    # Same created_at; the second question happens to get the smaller (random) id.
    first = message("zz", "clarification_request", position=0, question="First?")
    second = message("aa", "clarification_request", position=1, question="Second?")
    later = message("mm", created="2026-01-01T10:00:01Z")
    assert [m["id"] for m in transcript_order([later, second, first])] == ["zz", "aa", "mm"]
    assert [m["id"] for m in upsert_message([second], first)] == ["zz", "aa"]


# -- overlay answers -------------------------------------------------------------------------

BUNDLE = {
    "pending_id": "p1",
    "questions": [
        {
            "message_id": "q1",
            "question": "Which DB?",
            "options": [{"id": "o1", "label": "A"}, {"id": "o2", "label": "B"}],
        },
        {"message_id": "q2", "question": "Anything else?", "options": []},
    ],
}


def test_options_act_as_a_single_choice_and_toggle_off() -> None:
    questions = question_items(BUNDLE)
    questions = choose_option(questions, "q1", "o1")
    questions = choose_option(questions, "q1", "o2")
    assert [o.selected for o in questions[0].options] == [False, True]
    questions = choose_option(questions, "q1", "o2")
    assert not any(o.selected for o in questions[0].options)


def test_every_question_must_be_answered_before_submitting() -> None:
    questions = question_items(BUNDLE)
    assert first_unanswered(questions) == 0
    questions = choose_option(questions, "q1", "o2")
    assert first_unanswered(questions) == 1
    questions = set_answer_text(questions, "q2", "   ")
    assert first_unanswered(questions) == 1
    questions = set_answer_text(questions, "q2", " ship it ")
    assert first_unanswered(questions) is None
    assert answers_payload(questions) == [
        {"message_id": "q1", "option_ids": ["o2"], "text": ""},
        {"message_id": "q2", "option_ids": [], "text": "ship it"},
    ]


def test_refreshing_the_bundle_keeps_what_the_user_already_chose() -> None:
    questions = set_answer_text(choose_option(question_items(BUNDLE), "q1", "o1"), "q2", "x")
    refreshed = question_items(BUNDLE, questions)
    assert refreshed[0].options[0].selected and refreshed[1].text == "x"
    # A question answered elsewhere drops out; the rest keeps its state.
    partial = {**BUNDLE, "questions": BUNDLE["questions"][1:]}
    assert [(q.message_id, q.text) for q in question_items(partial, questions)] == [("q2", "x")]
    assert question_items(None) == []


# -- live events -----------------------------------------------------------------------------


def plan(
    event_type: str,
    data: dict[str, Any],
    *,
    active_task: str = "t1",
    active_session: str = "s1",
    pending: str | None = None,
    showing: bool = False,
    known: frozenset[str] = frozenset({"s1", "s2"}),
) -> EventPlan:
    return plan_event(
        event_type,
        data,
        active_task_id=active_task,
        active_session_id=active_session,
        session_pending=pending,
        showing_bundle=showing,
        known_session_ids=known,
    )


@pytest.mark.scenario("S05")
def test_new_question_event_discovers_the_bundle_in_the_same_event() -> None:
    data = {
        "task_id": "t1",
        "session_id": "s1",
        "message": {"id": "q1", "type": "clarification_request"},
        "pending_action": "clarification",
    }
    # Called after the projection applied the event: the session already says clarification.
    result = plan("session.message.added", data, pending="clarification")
    assert result.discover_bundles and not result.reload_sessions
    assert "t1" in result.stale_session_lists


def test_plain_message_on_a_clean_session_needs_no_reads() -> None:
    data = {"task_id": "t1", "session_id": "s1", "message": {"id": "m1", "type": "message"}}
    assert not plan("session.message.added", data).needs_io
    # ... unless an overlay is showing (the message may have resolved it).
    assert plan("session.message.updated", data, showing=True).discover_bundles


def test_message_of_an_unknown_session_of_the_active_task_reloads_the_tabs() -> None:
    data = {"task_id": "t1", "session_id": "s9", "message": {"id": "m1", "type": "message"}}
    result = plan("session.message.added", data)
    assert result.reload_sessions and not result.discover_bundles


def test_turn_events_refresh_tabs_bundles_and_after_completion_the_transcript() -> None:
    started = plan("turn.started", {"task_id": "t1", "session_id": "s1", "turn_id": "u2"})
    assert started.reload_sessions and started.discover_bundles and not started.reload_messages
    done = plan("turn.completed", {"task_id": "t1", "session_id": "s1", "turn_id": "u2"})
    assert done.reload_messages


def test_events_of_other_tasks_only_mark_their_cached_session_lists_stale() -> None:
    data = {
        "task_id": "t7",
        "session_id": "s7",
        "message": {"id": "m", "type": "clarification_request"},
    }
    result = plan("session.message.added", data, pending="clarification")
    assert not result.needs_io
    assert result.stale_session_lists == {"t7"}


def test_task_events_reload_the_task() -> None:
    for kind in ("task.created", "task.updated", "task.status_summary.invalidated"):
        assert plan(kind, {"task_id": "t5"}).reload_tasks == {"t5"}
    deleted = plan("task.deleted", {"task_id": "t5"})
    assert deleted.reload_tasks == {"t5"} and deleted.stale_session_lists == {"t5"}
    assert not plan("task.status_summary.updated", {"task_id": "t5"}).needs_io


def test_plans_merge() -> None:
    merged = EventPlan()
    merged.merge(EventPlan(reload_tasks={"a"}))
    merged.merge(EventPlan(reload_tasks={"b"}, discover_bundles=True))
    assert merged.reload_tasks == {"a", "b"} and merged.discover_bundles


def _bundle(multi: bool) -> dict:
    return {
        "pending_id": "p",
        "questions": [
            {
                "message_id": "m",
                "question": "Targets?",
                "multi_select": multi,
                "options": [{"id": "o1", "label": "web"}, {"id": "o2", "label": "ios"}],
            }
        ],
    }


def _picked(questions: list) -> list[str]:
    return [o.id for o in questions[0].options if o.selected]


def test_a_single_choice_question_keeps_one_option() -> None:
    questions = question_items(_bundle(multi=False))
    questions = choose_option(choose_option(questions, "m", "o1"), "m", "o2")
    assert _picked(questions) == ["o2"]
    assert answers_payload(questions)[0]["option_ids"] == ["o2"]


def test_a_multi_select_question_toggles_each_option() -> None:
    questions = question_items(_bundle(multi=True))
    assert questions[0].multi_select
    questions = choose_option(choose_option(questions, "m", "o1"), "m", "o2")
    assert _picked(questions) == ["o1", "o2"]
    assert answers_payload(questions)[0]["option_ids"] == ["o1", "o2"]
    assert _picked(choose_option(questions, "m", "o1")) == ["o2"]
