"""Several workers on one PostgreSQL database: one revision order and one name.

- PostgreSQL gets the sequence ``projection_revision_seq``: every worker takes each projection
  revision's sequence from it, under the database's one epoch, so revisions from any worker
  compare in the order their reads started (``backend/projections/revision.py``). The epoch
  moves up once here, so revisions handed out before this migration (each backend start took
  a new epoch and counted in memory) stay older than every new one.
- ``kandev_meta`` gains ``instance_id``, a random name for this database: the workers' NATS
  subjects carry it, so installations sharing a NATS server never hear each other.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-05
"""

from __future__ import annotations

import secrets

import sqlalchemy as sa
from alembic import op

from backend.vocabulary import MetaKey

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

SEQUENCE = "projection_revision_seq"
INSTANCE_ID = MetaKey.INSTANCE_ID.value
EPOCH = MetaKey.PROJECTION_EPOCH.value


def upgrade() -> None:
    meta = sa.table(
        "kandev_meta",
        sa.column("key", sa.String),
        sa.column("int_value", sa.BigInteger),
        sa.column("text_value", sa.String),
    )
    op.bulk_insert(meta, [{"key": INSTANCE_ID, "int_value": 0, "text_value": secrets.token_hex(8)}])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.text(f"CREATE SEQUENCE {SEQUENCE} AS BIGINT START WITH 1"))
        bump = sa.text("UPDATE kandev_meta SET int_value = int_value + 1 WHERE key = :key")
        op.execute(bump.bindparams(key=EPOCH))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.text(f"DROP SEQUENCE IF EXISTS {SEQUENCE}"))
    delete = sa.text("DELETE FROM kandev_meta WHERE key = :key")
    op.execute(delete.bindparams(key=INSTANCE_ID))
