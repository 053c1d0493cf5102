"""The plain values activation reads from API payloads: revisions, task summaries, sessions.

Everything here is parsed strictly and fails closed: a value the client cannot order or trust
(an unparseable revision, a non-boolean ``input_capable``) never lets activation guess an owner.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self

#: ASCII decimal digits only: ``str.isdigit`` and ``int()`` also accept other scripts' digits,
#: underscores and surrounding blanks, none of which the backend ever sends.
_DECIMAL = re.compile(r"[0-9]+")

#: Sort position of a session whose ``created_at`` is missing or unreadable: oldest.
_NO_TIME = datetime.min.replace(tzinfo=UTC)


class RevisionError(ValueError):
    """A ``pending_action_revision`` the client cannot order; its projection is ignored."""


class PayloadError(ValueError):
    """A task or session payload without the fields activation needs."""


def _parse_epoch(raw: object) -> int:
    # The epoch is a decimal *string* so that values above 2**53 survive JavaScript; reading it
    # as a float (or comparing the strings) would order "10" before "9" or merge neighbours.
    if isinstance(raw, str) and _DECIMAL.fullmatch(raw):
        try:
            return int(raw)
        except ValueError as error:  # more digits than int() accepts by default
            raise RevisionError(f"epoch too long: {len(raw)} digits") from error
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    raise RevisionError(f"epoch must be a decimal string, got {raw!r}")


def _parse_sequence(raw: object) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    raise RevisionError(f"sequence must be a non-negative integer, got {raw!r}")


@dataclass(frozen=True, order=True, slots=True)
class Revision:
    """``pending_action_revision``: ordered by epoch (backend generation), then sequence.

    The field order makes the dataclass ordering exactly the contract's comparison.
    """

    epoch: int
    sequence: int

    @classmethod
    def parse(cls, raw: object) -> Revision:
        """``{"epoch": "<decimal>", "sequence": <int>}`` (or a ``Revision``); else
        :class:`RevisionError`."""
        if isinstance(raw, Revision):
            return raw
        if not isinstance(raw, Mapping):
            raise RevisionError(f"revision must be an object, got {raw!r}")
        return cls(_parse_epoch(raw.get("epoch")), _parse_sequence(raw.get("sequence")))

    @classmethod
    def parse_optional(cls, raw: object) -> Revision | None:
        """Like :meth:`parse`, but ``None`` for anything unorderable (callers then ignore the
        projection it labels instead of failing the whole payload)."""
        try:
            return cls.parse(raw)
        except RevisionError:
            return None


def parse_epoch(raw: object) -> int:
    """The boot payload's ``epoch`` (a decimal string) as an int; :class:`RevisionError` else."""
    return _parse_epoch(raw)


def pending_value(raw: object) -> str | None:
    """A ``pending_action`` as activation compares it: a non-empty string, or ``None``.

    ``""`` is the UI's own spelling of "none" (``TaskItem.pending_action``). Other types raise
    :class:`PayloadError`: treating garbage as "clean" would hide a question.
    """
    if raw is None or raw == "":
        return None
    if isinstance(raw, str):
        return raw
    raise PayloadError(f"pending_action must be a string or null, got {raw!r}")


def _revision_int(raw: object) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _optional_str(raw: object) -> str | None:
    return raw if isinstance(raw, str) and raw else None


def _required_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{key} must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class TaskSummary:
    """What a task row advertises, as activation snapshots it when it begins and revalidates it
    when the session load settles.

    ``revision`` is ``None`` for the legacy projection (``status_summary`` null; the task's own
    ``pending_action`` field is all there is). Presence of the task is *not* encoded here: a task
    that disappeared is passed as ``None``, never as an empty summary, so a deleted legacy task
    cannot look "unchanged" (S41).
    """

    task_id: str
    revision: int | None
    pending_action: str | None
    primary_session_id: str | None = None

    @property
    def legacy(self) -> bool:
        return self.revision is None

    @property
    def pending(self) -> bool:
        return self.pending_action is not None

    def same_projection(self, other: TaskSummary) -> bool:
        """Neither the summary revision nor the pending action moved."""
        return self.revision == other.revision and self.pending_action == other.pending_action

    @classmethod
    def from_task(cls, task: Mapping[str, Any]) -> Self:
        """From the contract's Task shape; falls back to the legacy top-level fields when
        ``status_summary`` is null."""
        task_id = _required_str(task, "id")
        summary = task.get("status_summary")
        if isinstance(summary, Mapping):
            return cls(
                task_id=task_id,
                revision=_revision_int(summary.get("revision")),
                pending_action=pending_value(summary.get("pending_action")),
                primary_session_id=_optional_str(summary.get("primary_session_id")),
            )
        return cls(
            task_id=task_id,
            revision=None,
            pending_action=pending_value(task.get("pending_action")),
            primary_session_id=_optional_str(task.get("primary_session_id")),
        )


def _parse_time(raw: object) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        value = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One session of a task-session list (REST or the WebSocket ``task_sessions.list``)."""

    id: str
    task_id: str
    is_primary: bool
    input_capable: bool
    pending_action: str | None
    revision: Revision | None
    created_at: datetime | None

    @property
    def newness(self) -> tuple[datetime, str]:
        """Sort key for "newest": ``created_at`` as a time (ISO strings with and without
        fractional seconds do not sort correctly as text), then ``id`` to break ties."""
        return (self.created_at or _NO_TIME, self.id)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Strict where it matters: ``input_capable`` and ``is_primary`` count only when they
        are ``true``; an unorderable revision becomes ``None`` (the projection store then never
        learns this value, so it cannot make the session a pending owner)."""
        if not isinstance(data, Mapping):
            raise PayloadError(f"a session must be an object, got {data!r}")
        return cls(
            id=_required_str(data, "id"),
            task_id=_required_str(data, "task_id"),
            is_primary=data.get("is_primary") is True,
            input_capable=data.get("input_capable") is True,
            pending_action=pending_value(data.get("pending_action")),
            revision=Revision.parse_optional(data.get("pending_action_revision")),
            created_at=_parse_time(data.get("created_at")),
        )


def sessions_from_json(payload: Mapping[str, Any]) -> tuple[SessionInfo, ...]:
    """``{"sessions": [...]}`` (REST body or ``task_sessions.list.result`` data)."""
    raw = payload.get("sessions")
    if not isinstance(raw, Sequence) or isinstance(raw, str | bytes):
        raise PayloadError("sessions must be a list")
    return tuple(SessionInfo.from_json(item) for item in raw)
