"""Per-session ``pending_action`` projections, newest revision wins.

REST task-session lists and semantic message events both carry a session's authoritative
``pending_action`` with a ``pending_action_revision`` from one backend clock. They can arrive in
any order (S06), so the client keeps, per session, only the value with the newest
``(epoch, sequence)``; anything older or equal is ignored, whichever channel delivered it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from state.activation.models import (
    PayloadError,
    Revision,
    SessionInfo,
    parse_epoch,
    pending_value,
)


@dataclass(frozen=True, slots=True)
class SessionProjection:
    """The newest accepted projection of one session."""

    pending_action: str | None
    revision: Revision


class SessionProjections:
    """The client's per-session projection cache (one per browser tab, shared by every
    activation surface).

    The epoch floor rejects results from a backend generation older than one the client has
    already seen, even for a session it has never cached: after a restart, a late pre-restart
    result for an unseen session is not evidence of current state (spec, API surface). The floor
    rises with every accepted revision and with :meth:`rebuild`; it never falls.
    """

    def __init__(self, epoch_floor: int = 0) -> None:
        self._entries: dict[str, SessionProjection] = {}
        self._floor = epoch_floor

    @property
    def epoch_floor(self) -> int:
        return self._floor

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, session_id: str) -> SessionProjection | None:
        return self._entries.get(session_id)

    def pending_action(self, session_id: str) -> str | None:
        """The cached value; ``None`` both for "clean" and "unknown" — use :meth:`get` to tell
        them apart."""
        entry = self._entries.get(session_id)
        return entry.pending_action if entry is not None else None

    def apply(
        self,
        session_id: str,
        pending_action_present: bool,
        pending_action: object,
        revision: object,
    ) -> bool:
        """Offer one projection; ``True`` when it became the session's newest value.

        ``pending_action_present=False`` models an event that omitted the field (projection
        failed, or a replaceable content-only update): the cached value *and its revision* stay
        as they are, whatever else the event carries. An explicit ``None`` is a clean session.
        Ignored (``False``): an older-or-equal revision, an epoch below the floor, an unorderable
        revision, or a ``pending_action`` that is neither a string nor null.
        """
        if not pending_action_present:
            return False
        parsed = Revision.parse_optional(revision)
        if parsed is None or parsed.epoch < self._floor:
            return False
        try:
            value = pending_value(pending_action)
        except PayloadError:
            return False
        current = self._entries.get(session_id)
        if current is not None and parsed <= current.revision:
            return False
        self._entries[session_id] = SessionProjection(value, parsed)
        self._floor = max(self._floor, parsed.epoch)
        return True

    def apply_session(self, session: SessionInfo) -> bool:
        """A session of a REST / WebSocket snapshot (always carries the field, maybe null)."""
        return self.apply(session.id, True, session.pending_action, session.revision)

    def apply_sessions(self, sessions: Iterable[SessionInfo]) -> frozenset[str]:
        """A whole snapshot; returns the ids whose projection it advanced."""
        return frozenset(s.id for s in sessions if self.apply_session(s))

    def apply_event(self, data: Mapping[str, Any]) -> bool:
        """The ``data`` of a ``session.message.added/updated/deleted`` or ``session.updated``
        frame (a field it omits keeps the held value).

        Call it before pending discovery runs for the same event, so a new current-turn
        question already finds its session advertising ``clarification`` (S05).
        """
        session_id = data.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            return False
        return self.apply(
            session_id,
            "pending_action" in data,
            data.get("pending_action"),
            data.get("pending_action_revision"),
        )

    def rebuild(self, epoch: int | str) -> None:
        """The client rebuilt its state from a boot payload of backend generation ``epoch``.

        Raises the floor (never lowers it) and drops cached values from older generations: they
        were computed by a backend that is gone. Values of the current generation stay, so a
        late same-generation result still cannot replace a newer one already seen.
        """
        self._floor = max(self._floor, parse_epoch(epoch))
        self._entries = {
            sid: entry
            for sid, entry in self._entries.items()
            if entry.revision.epoch >= self._floor
        }
