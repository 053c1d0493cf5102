"""How request rows' JSON metadata is read: pending evidence, bundle ids, delivery intents.

These row-level predicates are shared by the schema's partial indexes (``backend.models``) and
by the authority rule (``backend.authority``); one definition keeps the index predicates and the
query predicates textually identical, which both databases need before they use a partial
index. Constants are rendered inline for the same reason.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import String, and_, literal_column, or_
from sqlalchemy.sql.elements import ColumnElement

from backend.db.json import json_text
from backend.vocabulary import MessageType, RequestStatus

REQUEST_TYPES: tuple[str, ...] = (
    MessageType.CLARIFICATION_REQUEST.value,
    MessageType.PERMISSION_REQUEST.value,
)
#: Key of message metadata holding an unfinished response-delivery intent.
DELIVERY_INTENT = "delivery_intent"

_SAFE_CONSTANT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def constant(value: str) -> ColumnElement[str]:
    """A trusted string constant rendered inline instead of as a bound parameter."""
    if not _SAFE_CONSTANT.match(value):
        raise ValueError(f"not a safe SQL constant: {value!r}")
    return literal_column(f"'{value}'", String)


def pending_id(message: Any) -> ColumnElement[str]:
    return json_text(message.c.metadata, "pending_id")


def is_request(message: Any) -> ColumnElement[bool]:
    return message.c.type.in_([constant(t) for t in REQUEST_TYPES])


def is_pending_row(message: Any) -> ColumnElement[bool]:
    """Pending evidence on one row. A missing status counts (legacy writers omitted it); turn
    ownership, applied by the bundle predicate, then decides whether that evidence matters."""
    status = json_text(message.c.metadata, "status")
    return or_(status.is_(None), status == constant(RequestStatus.PENDING.value))


def is_open_request(message: Any) -> ColumnElement[bool]:
    """A request row still showing pending evidence: the only rows that can make a bundle
    active (the partial index ``ix_messages_open_requests`` holds exactly these)."""
    return and_(is_request(message), is_pending_row(message))


def has_delivery_intent(message: Any) -> ColumnElement[bool]:
    return json_text(message.c.metadata, DELIVERY_INTENT).is_not(None)
