"""Transcript items by message type, in transcript order (time, place in the bundle, id); a
question waits for the user only while its bundle is active, whatever its row says."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from state.ui_models.labels import as_text, state_label

#: Rendering kinds of transcript items.
USER = "user"
AGENT = "agent"
QUESTION = "question"
PERMISSION = "permission"
STATUS = "status"

_REQUEST_STATUS = {
    # status -> (label, colour)
    "answered": ("Answered", "green"),
    "rejected": ("Skipped", "gray"),
    "cancelled": ("Cancelled", "gray"),
    "expired": ("Expired", "gray"),
}


@dataclass
class MessageItem:
    id: str
    kind: str
    author: str
    content: str
    created_at: str = ""
    status_label: str = ""
    status_color: str = "gray"
    #: For questions: the options as one line; for answered ones, what the user said.
    detail: str = ""
    answer: str = ""
    #: The question still waits for the user (it is in an active bundle).
    waiting: bool = False


def _options_line(meta: Mapping[str, Any]) -> str:
    labels = [
        as_text(o.get("label"))
        for o in meta.get("options", [])
        if isinstance(o, Mapping) and as_text(o.get("label"))
    ]
    return " · ".join(labels)


def _answer_line(meta: Mapping[str, Any]) -> str:
    answer = meta.get("answer")
    if not isinstance(answer, Mapping):
        return ""
    parts = [as_text(label) for label in answer.get("option_labels", []) if as_text(label)]
    text = as_text(answer.get("text")).strip()
    if text:
        parts.append(text)
    return ", ".join(parts)


def message_item(
    message: Mapping[str, Any],
    active_pending_ids: frozenset[str],
    *,
    permission_pending: bool = False,
) -> MessageItem:
    """One transcript row, by message type.

    A clarification whose status is ``pending`` but whose bundle is not active (an older
    turn's question, or one waiting for its delivery) is shown as no longer active: only the
    repository rule decides whether a question is answerable, never the row's own status.
    A permission request waits while its bundle is active too (the overlay lists it), or
    while the session's projection says ``permission`` (``permission_pending``); its options
    are its detail line, like a question's.
    """
    mtype = as_text(message.get("type"))
    author = as_text(message.get("author"))
    meta = message.get("metadata") if isinstance(message.get("metadata"), Mapping) else {}
    base = {
        "id": message["id"],
        "author": author,
        "content": as_text(message.get("content")),
        "created_at": as_text(message.get("created_at")),
    }
    if mtype in ("clarification_request", "permission_request"):
        status = as_text(meta.get("status"), "pending") or "pending"
        pid = as_text(meta.get("pending_id"))
        if mtype == "clarification_request":
            kind = QUESTION
            content = as_text(meta.get("question")) or base["content"]
            base["content"] = content
        else:
            kind = PERMISSION
        if status == "pending":
            waiting = pid in active_pending_ids
            if mtype == "permission_request":
                waiting = waiting or permission_pending
            if waiting:
                label, color = "Waiting for you", "amber"
            else:
                label, color = "No longer active", "gray"
        else:
            waiting = False
            label, color = _REQUEST_STATUS.get(status, (state_label(status), "gray"))
        return MessageItem(
            kind=kind,
            status_label=label,
            status_color=color,
            detail=_options_line(meta),
            answer=_answer_line(meta),
            waiting=waiting,
            **base,
        )
    if mtype == "status" or author not in ("user", "agent"):
        return MessageItem(kind=STATUS, **base)
    return MessageItem(kind=USER if author == "user" else AGENT, **base)


def message_items(
    messages: Iterable[Mapping[str, Any]],
    active_pending_ids: frozenset[str],
    *,
    permission_pending: bool = False,
) -> list[MessageItem]:
    return [
        message_item(m, active_pending_ids, permission_pending=permission_pending) for m in messages
    ]


def _message_order(message: Mapping[str, Any]) -> tuple[str, int, str]:
    """Transcript order: time, then the question's place in its bundle (rows of one bundle
    share ``created_at``; their ids are random within a millisecond), then id."""
    meta = message.get("metadata")
    position = meta.get("position") if isinstance(meta, Mapping) else None
    if not isinstance(position, int) or isinstance(position, bool):
        position = 0
    return (as_text(message.get("created_at")), position, as_text(message.get("id")))


def transcript_order(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages in transcript order (see :func:`_message_order`)."""
    return sorted((dict(m) for m in messages), key=_message_order)


def upsert_message(
    messages: Sequence[Mapping[str, Any]], message: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The transcript with ``message`` added or replaced (by id), in (created_at, id) order —
    the order the messages route returns."""
    out = [dict(m) for m in messages if m.get("id") != message.get("id")]
    out.append(dict(message))
    out.sort(key=_message_order)
    return out


def remove_message(messages: Sequence[Mapping[str, Any]], message_id: str) -> list[dict[str, Any]]:
    return [dict(m) for m in messages if m.get("id") != message_id]
