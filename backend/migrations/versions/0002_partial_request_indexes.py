"""Partial indexes for request rows: the pending-id index and the open-request index.

About 3% of messages are requests, and far fewer still show pending evidence; indexing only
those rows lets projections start from the few sessions that could have a pending action.
The predicates come from ``backend.request_evidence``, the same code the queries use, because
both databases only use a partial index when the query's predicate matches the index's.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from backend.request_evidence import is_open_request, pending_id

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_messages = sa.table(
    "task_session_messages", sa.column("session_id"), sa.column("type"), sa.column("metadata")
)


def _where(predicate: sa.ColumnElement[bool]) -> dict[str, sa.ColumnElement[bool]]:
    return {"sqlite_where": predicate, "postgresql_where": predicate}


def upgrade() -> None:
    op.drop_index("ix_messages_pending_id", table_name="task_session_messages")
    op.create_index(
        "ix_messages_pending_id",
        "task_session_messages",
        [pending_id(_messages)],
        **_where(pending_id(_messages).is_not(None)),
    )
    op.create_index(
        "ix_messages_open_requests",
        "task_session_messages",
        [_messages.c.session_id, pending_id(_messages), _messages.c.type],
        **_where(is_open_request(_messages)),
    )


def downgrade() -> None:
    op.drop_index("ix_messages_open_requests", table_name="task_session_messages")
    op.drop_index("ix_messages_pending_id", table_name="task_session_messages")
    op.create_index("ix_messages_pending_id", "task_session_messages", [pending_id(_messages)])
