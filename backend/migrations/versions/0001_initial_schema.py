"""Initial schema: workspaces, workflows, tasks, sessions, turns, messages, summaries.

Revision ID: 0001
Revises:
Create Date: 2026-12-02 10:17:06.138138
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from backend.db.json import json_text
from backend.db.types import JSONDocument, UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kandev_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("int_value", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_table(
        "users",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("email"),
        sa.UniqueConstraint("token_hash"),
    )
    op.create_table(
        "workspaces",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "workflows",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("workspace_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_workflows_workspace_id"), ["workspace_id"], unique=False
        )

    op.create_table(
        "workspace_memberships",
        sa.Column("workspace_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("workspace_id", "user_id"),
    )
    op.create_table(
        "workflow_steps",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("workflow_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["workflow_id"], ["workflows.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("workflow_id", "position"),
    )
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("workspace_id", sa.String(length=64), nullable=False),
        sa.Column("workflow_id", sa.String(length=64), nullable=False),
        sa.Column("workflow_step_id", sa.String(length=64), nullable=False),
        sa.Column("title", sa.String(length=500), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workflow_id"],
            ["workflows.id"],
        ),
        sa.ForeignKeyConstraint(
            ["workflow_step_id"],
            ["workflow_steps.id"],
        ),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_tasks_workflow_step_id"), ["workflow_step_id"], unique=False
        )
        batch_op.create_index(
            "ix_tasks_workspace_created", ["workspace_id", "created_at"], unique=False
        )

    op.create_table(
        "task_sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=32), nullable=False),
        sa.Column("is_primary", sa.Boolean(), nullable=False),
        sa.Column("agent_profile", sa.String(length=100), nullable=False),
        sa.Column("prompt_generation", sa.BigInteger(), nullable=False),
        sa.Column("pending_action", sa.String(length=32), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.create_index(
            "ix_task_sessions_task_created", ["task_id", "created_at"], unique=False
        )

    op.create_table(
        "task_status_summaries",
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("revision", sa.BigInteger(), nullable=False),
        sa.Column("pending_action", sa.String(length=32), nullable=True),
        sa.Column("primary_session_id", sa.String(length=64), nullable=True),
        sa.Column("session_state", sa.String(length=32), nullable=True),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("task_id"),
    )
    op.create_table(
        "task_session_messages",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("turn_id", sa.String(length=64), nullable=True),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("author", sa.String(length=32), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("metadata", JSONDocument, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["task_sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("task_session_messages", schema=None) as batch_op:
        batch_op.create_index(
            "ix_messages_session_order", ["session_id", "created_at", "id"], unique=False
        )
        batch_op.create_index("ix_messages_turn_type", ["turn_id", "type"], unique=False)

    op.create_table(
        "task_session_turns",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("prompt_generation", sa.BigInteger(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("completed_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("metadata", JSONDocument, nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["task_sessions.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("task_session_turns", schema=None) as batch_op:
        batch_op.create_index(
            "ix_turns_session_order", ["session_id", "started_at", "created_at", "id"], unique=False
        )
    # Expression index: the same json_text construct the bundle queries use, so each dialect
    # renders the identical expression its planner needs to match.
    op.create_index(
        "ix_messages_pending_id",
        "task_session_messages",
        [json_text(sa.column("metadata"), "pending_id")],
    )
    meta = sa.table(
        "kandev_meta", sa.column("key", sa.String), sa.column("int_value", sa.BigInteger)
    )
    op.bulk_insert(meta, [{"key": "projection_epoch", "int_value": 0}])


def downgrade() -> None:
    op.drop_index("ix_messages_pending_id", table_name="task_session_messages")
    with op.batch_alter_table("task_session_turns", schema=None) as batch_op:
        batch_op.drop_index("ix_turns_session_order")

    op.drop_table("task_session_turns")
    with op.batch_alter_table("task_session_messages", schema=None) as batch_op:
        batch_op.drop_index("ix_messages_turn_type")
        batch_op.drop_index("ix_messages_session_order")

    op.drop_table("task_session_messages")
    op.drop_table("task_status_summaries")
    with op.batch_alter_table("task_sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_task_sessions_task_created")

    op.drop_table("task_sessions")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_tasks_workspace_created")
        batch_op.drop_index(batch_op.f("ix_tasks_workflow_step_id"))

    op.drop_table("tasks")
    op.drop_table("workflow_steps")
    op.drop_table("workspace_memberships")
    with op.batch_alter_table("workflows", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_workflows_workspace_id"))

    op.drop_table("workflows")
    op.drop_table("workspaces")
    op.drop_table("users")
    op.drop_table("kandev_meta")
