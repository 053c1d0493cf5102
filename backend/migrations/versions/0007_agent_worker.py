"""The worker running each session's agent (several workers on PostgreSQL + NATS).

A session's agent is one process, started by one worker; every prompt of that session (a new
turn, a detached answer's resume) must reach that process, whichever worker admitted it
(``backend/agents/routing.py``). The column names the worker; the worker's advisory lock says
whether it still lives, so a dead owner's sessions are taken over by compare-and-set. Unused
with one process per database (it stays empty).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("agent_worker", sa.String(length=20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.drop_column("agent_worker")
