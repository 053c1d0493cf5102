"""The agent's own session id (ACP ``sessionId``) on each Kandev session.

An agent process dies with the backend; a restarted backend resumes the conversation with
``session/load`` under this id, where the agent supports it, instead of starting afresh.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_session_id", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.drop_column("agent_session_id")
