"""The SQLModel tables as typed SQLAlchemy Core ``Table`` objects, for Core statements.

SQLModel declares ``__table__`` only at run time, so reading it needs a type-checker escape;
it is written once, here, and every module imports the table it queries from this one place.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table

from backend.models import (
    KandevMeta,
    Task,
    TaskSession,
    TaskSessionMessage,
    TaskSessionTurn,
    TaskStatusSummary,
    User,
    Workflow,
    WorkflowStep,
    Workspace,
    WorkspaceMembership,
)


def table_of(model: Any) -> Table:
    """The Core table behind a SQLModel table class."""
    table: Table = model.__table__
    return table


workspaces = table_of(Workspace)
users = table_of(User)
memberships = table_of(WorkspaceMembership)
workflows = table_of(Workflow)
workflow_steps = table_of(WorkflowStep)
tasks = table_of(Task)
sessions = table_of(TaskSession)
turns = table_of(TaskSessionTurn)
messages = table_of(TaskSessionMessage)
summaries = table_of(TaskStatusSummary)
meta = table_of(KandevMeta)
