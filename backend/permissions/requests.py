"""What a permission request is made of: the options an agent offers, the row it is stored as,
and the choice a user makes. Pure code (no I/O), shared by the desk, the executor and the UI
models, so the row's shape is written down once.

A permission request is stored like a one-question clarification bundle (``pending_id``,
``status``, ``question``, ``options``), so the repository rule, the pending projection and the
UI read it without a second vocabulary; an answer is stored in the clarification answer shape
(``option_ids``, ``option_labels``, ``text``) for the same reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from backend.vocabulary import RequestStatus

#: The option kinds ACP defines (``PermissionOptionKind``); anything else is stored as-is.
ALLOW_ONCE = "allow_once"
REJECT_ONCE = "reject_once"
#: What the row says when the agent gave no title (ACP's tool call title is optional).
DEFAULT_TITLE = "The agent asks for permission"
#: Agents' text is stored for display; one row must not carry megabytes.
MAX_TEXT_CHARS = 16 * 1024


@dataclass(frozen=True, slots=True)
class PermissionOption:
    """One choice the agent offers (ACP ``PermissionOption``: ``optionId``, ``name``,
    ``kind``)."""

    id: str
    label: str
    kind: str


def _clean(text: str) -> str:
    """PostgreSQL text cannot hold NUL; an agent's text is display text, so it is dropped."""
    return text.replace("\x00", "")[:MAX_TEXT_CHARS]


def usable_options(options: Sequence[PermissionOption]) -> list[PermissionOption]:
    """The options a user can pick: non-empty ids, the first of any repeated id (the answer
    names an option by id, so ids must be unique)."""
    seen: set[str] = set()
    usable = []
    for option in options:
        option_id = _clean(option.id)
        if not option_id or option_id in seen:
            continue
        seen.add(option_id)
        usable.append(PermissionOption(option_id, _clean(option.label) or option_id, option.kind))
    return usable


def title_of(title: str | None) -> str:
    return _clean(title or "").strip() or DEFAULT_TITLE


def request_metadata(
    pending_id: str, title: str, options: Sequence[PermissionOption]
) -> dict[str, Any]:
    """A pending request row's metadata (the clarification row shape, one question)."""
    return {
        "pending_id": pending_id,
        "status": RequestStatus.PENDING.value,
        "question": title,
        "options": [{"id": o.id, "label": o.label, "kind": o.kind} for o in options],
    }


def chosen_answer(metadata: Mapping[str, Any], option_id: str) -> dict[str, Any] | None:
    """The stored answer for picking ``option_id`` on a request row, or ``None`` when the row
    offers no such option."""
    for option in metadata.get("options") or []:
        if isinstance(option, Mapping) and option.get("id") == option_id:
            return {
                "option_ids": [option_id],
                "option_labels": [str(option.get("label", option_id))],
                "text": "",
                "kind": str(option.get("kind", "")),
            }
    return None
