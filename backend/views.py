"""JSON shapes of rows, as the API contract and event payloads give them (one place)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from backend.vocabulary import TERMINAL_SESSION_STATES


def iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def message_view(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "session_id": row["session_id"],
        "turn_id": row["turn_id"],
        "type": row["type"],
        "author": row["author"],
        "content": row["content"],
        "metadata": row["metadata"],
        "created_at": iso(row["created_at"]),
    }


def turn_view(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "session_id": row.session_id,
        "started_at": iso(row.started_at),
        "completed_at": iso(row.completed_at),
        "created_at": iso(row.created_at),
    }


def session_view(
    row: Mapping[str, Any], pending_action: str | None, revision: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "id": row["id"],
        "task_id": row["task_id"],
        "state": row["state"],
        "is_primary": bool(row["is_primary"]),
        "input_capable": row["state"] not in TERMINAL_SESSION_STATES,
        "pending_action": pending_action,
        "pending_action_revision": revision,
        "created_at": iso(row["created_at"]),
    }
