"""The key agent credentials are derived from (``backend/agent_credentials.py``).

``kandev_meta`` gains a text value; the key is generated here, once per database, so every
backend process (and every restart) derives the same per-session credential.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

from backend.vocabulary import MetaKey

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

AGENT_CREDENTIAL_KEY = MetaKey.AGENT_CREDENTIAL_KEY.value


def upgrade() -> None:
    with op.batch_alter_table("kandev_meta", schema=None) as batch_op:
        batch_op.add_column(sa.Column("text_value", sa.String(length=128), nullable=True))
    meta = sa.table(
        "kandev_meta",
        sa.column("key", sa.String),
        sa.column("int_value", sa.BigInteger),
        sa.column("text_value", sa.String),
    )
    op.bulk_insert(
        meta,
        [{"key": AGENT_CREDENTIAL_KEY, "int_value": 0, "text_value": secrets.token_urlsafe(32)}],
    )


def downgrade() -> None:
    delete = sa.text("DELETE FROM kandev_meta WHERE key = :key")
    op.execute(delete.bindparams(key=AGENT_CREDENTIAL_KEY))
    with op.batch_alter_table("kandev_meta", schema=None) as batch_op:
        batch_op.drop_column("text_value")
