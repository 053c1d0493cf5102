"""Partial indexes for unfinished durable work: what recovery, and with several workers the
sweep every few seconds, looks for.

Delivery intents on messages and the reservation, acknowledgement and outbox markers on turns
(``TurnMarker``) are held by a handful of rows at any time, but finding them scanned every
message and every turn; with several workers each live worker runs that search every
``KANDEV_WORKER_SWEEP_S``. The predicates come from the code the queries use
(``json_text``/``json_flag``), so both databases match the index's predicate to the query's.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from backend.db.json import json_flag, json_text
from backend.request_evidence import DELIVERY_INTENT, pending_id
from backend.vocabulary import TurnMarker

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_MESSAGES = "task_session_messages"
_TURNS = "task_session_turns"
_messages = sa.table(_MESSAGES, sa.column("metadata"))
_turns = sa.table(_TURNS, sa.column("session_id"), sa.column("metadata"))


def upgrade() -> None:
    has_intent = json_text(_messages.c.metadata, DELIVERY_INTENT).is_not(None)
    op.create_index(
        "ix_messages_delivery_intents",
        _MESSAGES,
        [pending_id(_messages)],
        sqlite_where=has_intent,
        postgresql_where=has_intent,
    )
    for marker in TurnMarker:
        flagged = json_flag(_turns.c.metadata, marker.value)
        op.create_index(
            f"ix_turns_{marker.value}",
            _TURNS,
            [_turns.c.session_id],
            sqlite_where=flagged,
            postgresql_where=flagged,
        )


def downgrade() -> None:
    for marker in reversed(list(TurnMarker)):
        op.drop_index(f"ix_turns_{marker.value}", table_name=_TURNS)
    op.drop_index("ix_messages_delivery_intents", table_name=_MESSAGES)
