"""A response's content, checked and shaped before anything is written: the answers must
belong to the bundle and say something (400 otherwise), and become the rows' patches and the
agent's view of them. Pure functions: the durable steps live in ``respond.py``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.db.tables import messages
from backend.errors import DomainError
from backend.request_evidence import pending_id as pending_id_of
from backend.vocabulary import RequestStatus


class InvalidResponse(DomainError):
    status = 400
    code = "validation"


@dataclass(frozen=True, slots=True)
class Answer:
    message_id: str
    option_ids: tuple[str, ...]
    text: str


_BUNDLE_ROWS = (
    select(messages)
    .where(pending_id_of(messages) == bindparam("bundle"))
    .order_by(messages.c.created_at, messages.c.id)
)


async def bundle_rows(conn: AsyncConnection, pending_id: str) -> list[Any]:
    """Every row of the bundle, in question order (the statement is built once: every
    answer reads it)."""
    return list(await conn.execute(_BUNDLE_ROWS, {"bundle": pending_id}))


def check_answers(
    rows: Sequence[Any], answers: Sequence[Answer], rejected: bool
) -> dict[str, dict[str, Any]]:
    """Ids and options must belong to the bundle; every answer must say something. Returns
    each answered question's stored answer, by message id."""
    if rejected:
        if answers:
            raise InvalidResponse("send either answers or rejected, not both")
        return {}
    if not answers:
        raise InvalidResponse("answers are required unless rejected is true")
    by_id = {row.id: row for row in rows}
    values: dict[str, dict[str, Any]] = {}
    for answer in answers:
        row = by_id.get(answer.message_id)
        if row is None:
            raise InvalidResponse(f"unknown message id {answer.message_id!r}")
        if answer.message_id in values:
            raise InvalidResponse(f"message id {answer.message_id!r} answered twice")
        options = {o["id"]: o["label"] for o in row.metadata.get("options", [])}
        unknown = [o for o in answer.option_ids if o not in options]
        if unknown:
            raise InvalidResponse(f"unknown option ids {unknown!r}")
        if len(answer.option_ids) > 1 and row.metadata.get("multi_select") is not True:
            raise InvalidResponse(f"the question {answer.message_id!r} takes one option")
        if len(set(answer.option_ids)) != len(answer.option_ids):
            raise InvalidResponse(f"an option of {answer.message_id!r} is picked twice")
        if not answer.option_ids and not answer.text.strip():
            raise InvalidResponse(f"the answer to {answer.message_id!r} is empty")
        values[answer.message_id] = {
            "option_ids": list(answer.option_ids),
            "option_labels": [options[o] for o in answer.option_ids],
            "text": answer.text,
            "question": row.metadata.get("question", row.content),
        }
    return values


def claim_patches(
    pending: Sequence[Any],
    answers: dict[str, dict[str, Any]],
    rejected: bool,
    reason: str | None,
) -> dict[str, dict[str, Any]]:
    """The metadata each still-pending row gets when the claim succeeds: a Skip covers them
    all; answers must cover exactly the pending questions (400 otherwise)."""
    if rejected:
        patch: dict[str, Any] = {"status": RequestStatus.REJECTED.value}
        if reason:
            patch["reason"] = reason
        return {row.id: patch for row in pending}
    pending_ids = {row.id for row in pending}
    missing = pending_ids - answers.keys()
    if missing:
        raise InvalidResponse(f"unanswered questions: {sorted(missing)!r}")
    not_pending = answers.keys() - pending_ids
    if not_pending:
        raise InvalidResponse(f"questions already resolved: {sorted(not_pending)!r}")
    return {
        mid: {"status": RequestStatus.ANSWERED.value, "answer": value}
        for mid, value in answers.items()
    }


def agent_answers(claimed: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """The answers as the agent receives them: the question (and its ``position`` in the
    bundle), the chosen options' ids and labels, the free text."""
    return tuple(
        {
            "message_id": row["id"],
            "position": row["metadata"].get("position"),
            "question": row["metadata"].get("question", row["content"]),
            "option_ids": row["metadata"].get("answer", {}).get("option_ids", []),
            "option_labels": row["metadata"].get("answer", {}).get("option_labels", []),
            "text": row["metadata"].get("answer", {}).get("text", ""),
        }
        for row in claimed
    )
