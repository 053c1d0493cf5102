"""The durable schema (SQLModel tables) and the small vocabularies stored in it.

Alembic migrations in ``backend/migrations`` create exactly these tables on SQLite and
PostgreSQL; ``tests/integration/test_migrations.py`` fails if the two drift apart.

Clarification state deliberately lives in message metadata (``pending_id``, ``status``,
``agent_disconnected``) and reservation state in turn metadata, as the spec's data model says:
those keys are historical evidence, and only :mod:`backend.authority` turns them into
"is this operational".
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Column, ForeignKey, Index, String, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from backend.clock import utcnow
from backend.db.json import json_flag, json_text
from backend.db.types import JSONDocument, UTCDateTime
from backend.ids import new_id
from backend.request_evidence import DELIVERY_INTENT, is_open_request, pending_id
from backend.vocabulary import (
    TERMINAL_SESSION_STATES,
    MessageType,
    MetaKey,
    PendingAction,
    RequestStatus,
    SessionState,
    TurnMarker,
)


def _id() -> str:
    return new_id()


def _created() -> Any:
    return Field(default_factory=utcnow, sa_column=Column(UTCDateTime(), nullable=False))


class Workspace(SQLModel, table=True):
    __tablename__ = "workspaces"

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    name: str = Field(max_length=200)
    created_at: datetime = _created()


class User(SQLModel, table=True):
    __tablename__ = "users"

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    name: str = Field(max_length=200)
    email: str = Field(max_length=320, unique=True)
    #: SHA-256 of the user's bearer token; tokens themselves are never stored.
    token_hash: str | None = Field(default=None, max_length=64, unique=True)
    created_at: datetime = _created()


class WorkspaceMembership(SQLModel, table=True):
    __tablename__ = "workspace_memberships"

    workspace_id: str = Field(
        sa_column=Column(
            String(64), ForeignKey("workspaces.id", ondelete="CASCADE"), primary_key=True
        )
    )
    user_id: str = Field(
        sa_column=Column(String(64), ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    )
    role: str = Field(default="member", max_length=32)


class Workflow(SQLModel, table=True):
    __tablename__ = "workflows"

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    workspace_id: str = Field(
        sa_column=Column(
            String(64), ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False, index=True
        )
    )
    name: str = Field(max_length=200)
    created_at: datetime = _created()


class WorkflowStep(SQLModel, table=True):
    __tablename__ = "workflow_steps"
    __table_args__ = (UniqueConstraint("workflow_id", "position"),)

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    workflow_id: str = Field(
        sa_column=Column(String(64), ForeignKey("workflows.id", ondelete="CASCADE"), nullable=False)
    )
    name: str = Field(max_length=200)
    position: int


class Task(SQLModel, table=True):
    __tablename__ = "tasks"
    __table_args__ = (Index("ix_tasks_workspace_created", "workspace_id", "created_at"),)

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    workspace_id: str = Field(
        sa_column=Column(
            String(64), ForeignKey("workspaces.id", ondelete="CASCADE"), nullable=False
        )
    )
    workflow_id: str = Field(
        sa_column=Column(String(64), ForeignKey("workflows.id"), nullable=False)
    )
    workflow_step_id: str = Field(
        sa_column=Column(String(64), ForeignKey("workflow_steps.id"), nullable=False, index=True)
    )
    title: str = Field(max_length=500)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    state: str = Field(default="TODO", max_length=32)
    created_at: datetime = _created()
    updated_at: datetime = _created()


class TaskSession(SQLModel, table=True):
    __tablename__ = "task_sessions"
    __table_args__ = (Index("ix_task_sessions_task_created", "task_id", "created_at"),)

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    task_id: str = Field(
        sa_column=Column(String(64), ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False)
    )
    state: str = Field(default=SessionState.CREATED, max_length=32)
    is_primary: bool = False
    agent_profile: str = Field(default="mock", max_length=100)
    #: The agent's own id for this conversation (ACP ``sessionId``): a restarted backend
    #: resumes it with ``session/load``.
    agent_session_id: str | None = Field(default=None, max_length=200)
    #: The worker running this session's agent, with several workers (``agents/routing.py``):
    #: every prompt of the session is sent to that worker while it lives.
    agent_worker: str | None = Field(default=None, max_length=20)
    #: Incremented by every accepted prompt; ready events carry it so stale ones are dropped.
    prompt_generation: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    #: Derived cache of the authoritative projection; never read as pending truth.
    pending_action: str | None = Field(default=None, max_length=32)
    created_at: datetime = _created()
    updated_at: datetime = _created()


class TaskSessionTurn(SQLModel, table=True):
    __tablename__ = "task_session_turns"
    __table_args__ = (
        # The current-turn rule orders a session's turns by these columns, newest first.
        Index("ix_turns_session_order", "session_id", "started_at", "created_at", "id"),
    )

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    session_id: str = Field(
        sa_column=Column(
            String(64), ForeignKey("task_sessions.id", ondelete="CASCADE"), nullable=False
        )
    )
    task_id: str = Field(max_length=64)
    prompt_generation: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    started_at: datetime = _created()
    completed_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime()))
    created_at: datetime = _created()
    meta: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", JSONDocument, nullable=False)
    )


class TaskSessionMessage(SQLModel, table=True):
    __tablename__ = "task_session_messages"

    id: str = Field(default_factory=_id, primary_key=True, max_length=64)
    session_id: str = Field(
        sa_column=Column(
            String(64), ForeignKey("task_sessions.id", ondelete="CASCADE"), nullable=False
        )
    )
    task_id: str = Field(max_length=64)
    #: Not a foreign key: legacy rows carry "" and malformed rows may name no durable turn.
    turn_id: str | None = Field(default=None, max_length=64)
    type: str = Field(default=MessageType.MESSAGE, max_length=64)
    author: str = Field(default="agent", max_length=32)
    content: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    meta: dict[str, Any] = Field(
        default_factory=dict, sa_column=Column("metadata", JSONDocument, nullable=False)
    )
    created_at: datetime = _created()


_messages = TaskSessionMessage.__table__  # type: ignore[attr-defined]
Index("ix_messages_session_order", _messages.c.session_id, _messages.c.created_at, _messages.c.id)
# Evidence that a turn has output, and the way from a turn to its request rows.
Index("ix_messages_turn_type", _messages.c.turn_id, _messages.c.type)
# Respond and bundle reads find every row of a bundle by its pending id (~3% of rows have one).
Index(
    "ix_messages_pending_id",
    pending_id(_messages),
    sqlite_where=pending_id(_messages).is_not(None),
    postgresql_where=pending_id(_messages).is_not(None),
)
# Only rows with pending evidence can make a bundle active: projections start from this small
# partial index instead of visiting every session's current turn.
Index(
    "ix_messages_open_requests",
    _messages.c.session_id,
    pending_id(_messages),
    _messages.c.type,
    sqlite_where=is_open_request(_messages),
    postgresql_where=is_open_request(_messages),
)
# Unfinished deliveries, found by recovery and by the workers' sweep (a handful at any time).
_has_intent = json_text(_messages.c.metadata, DELIVERY_INTENT).is_not(None)
Index(
    "ix_messages_delivery_intents",
    pending_id(_messages),
    sqlite_where=_has_intent,
    postgresql_where=_has_intent,
)
_turns = TaskSessionTurn.__table__  # type: ignore[attr-defined]
for _marker in TurnMarker:
    _flagged = json_flag(_turns.c.metadata, _marker.value)
    Index(
        f"ix_turns_{_marker.value}",
        _turns.c.session_id,
        sqlite_where=_flagged,
        postgresql_where=_flagged,
    )


class TaskStatusSummary(SQLModel, table=True):
    """A repaired cache of task-level status; ``revision`` only ever grows."""

    __tablename__ = "task_status_summaries"

    task_id: str = Field(
        sa_column=Column(String(64), ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True)
    )
    revision: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    pending_action: str | None = Field(default=None, max_length=32)
    primary_session_id: str | None = Field(default=None, max_length=64)
    session_state: str | None = Field(default=None, max_length=32)
    updated_at: datetime = _created()


class KandevMeta(SQLModel, table=True):
    """Durable per-database values: counters such as the projection epoch allocated at every
    backend start, and the key agent credentials are derived from."""

    __tablename__ = "kandev_meta"

    key: str = Field(primary_key=True, max_length=64)
    int_value: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    text_value: str | None = Field(default=None, max_length=128)


__all__ = [
    "TERMINAL_SESSION_STATES",
    "KandevMeta",
    "MessageType",
    "MetaKey",
    "PendingAction",
    "RequestStatus",
    "SessionState",
    "Task",
    "TaskSession",
    "TaskSessionMessage",
    "TaskSessionTurn",
    "TaskStatusSummary",
    "User",
    "Workflow",
    "WorkflowStep",
    "Workspace",
    "WorkspaceMembership",
]
