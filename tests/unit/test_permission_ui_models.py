"""The UI's view of an agent's permission request (pure models): the overlay's bundle of one
question, the transcript card, and the reads a permission event triggers."""

from __future__ import annotations

from backend.permissions.requests import PermissionOption, chosen_answer, request_metadata
from state.ui_models import PERMISSION, message_item, plan_event, question_items

OPTIONS = [PermissionOption("o1", "Allow", "allow_once"), PermissionOption("o2", "No", "reject")]


def bundle() -> dict:
    meta = request_metadata("p1", "Delete build/?", OPTIONS)
    return {
        "pending_id": "p1",
        "kind": "permission",
        "questions": [
            {"message_id": "m1", "question": meta["question"], "options": meta["options"]}
        ],
    }


def row(**meta: object) -> dict:
    return {
        "id": "m1",
        "session_id": "s1",
        "turn_id": "u1",
        "type": "permission_request",
        "author": "agent",
        "content": "Delete build/?",
        "metadata": {**request_metadata("p1", "Delete build/?", OPTIONS), **meta},
        "created_at": "2026-01-01T10:00:00Z",
    }


def test_a_permission_bundle_is_one_question_whose_granting_options_stand_out() -> None:
    (item,) = question_items(bundle())
    assert item.question == "Delete build/?"
    assert [(o.id, o.label, o.allows) for o in item.options] == [
        ("o1", "Allow", True),
        ("o2", "No", False),
    ]


def test_a_pending_request_waits_while_its_bundle_is_active_and_lists_its_options() -> None:
    item = message_item(row(), frozenset({"p1"}))
    assert (item.kind, item.waiting, item.status_label) == (PERMISSION, True, "Waiting for you")
    assert item.detail == "Allow · No"
    assert not message_item(row(), frozenset()).waiting


def test_an_answered_request_shows_the_choice() -> None:
    answer = chosen_answer(request_metadata("p1", "t", OPTIONS), "o2")
    item = message_item(row(status="answered", answer=answer), frozenset())
    assert (item.status_label, item.answer, item.waiting) == ("Answered", "No", False)
    assert chosen_answer(request_metadata("p1", "t", OPTIONS), "o3") is None


def test_a_new_permission_request_event_discovers_its_bundle() -> None:
    data = {
        "task_id": "t1",
        "session_id": "s1",
        "message": {"id": "m1", "type": "permission_request"},
    }
    result = plan_event(
        "session.message.added",
        data,
        active_task_id="t1",
        active_session_id="s1",
        session_pending=None,  # even before the projection says so
        showing_bundle=False,
        known_session_ids=frozenset({"s1"}),
    )
    assert result.discover_bundles
