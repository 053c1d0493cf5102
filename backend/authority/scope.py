"""Which sessions a read of the rule covers, in a form its statement can be built for once.

The rule's statements are large (aliases, correlated subqueries, aggregates): building one in
SQLAlchemy costs milliseconds of event-loop CPU, far more than running it. The answer path
reads the rule a dozen times per answer, always scoped the same few ways, so those reads name
a :class:`Scope` instead of passing a clause: the statement for each :class:`ScopeKind` is
built once with a bound parameter, and each read only binds its value. Ad hoc reads (access
filtered task lists) still pass any clause and build their statement each time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from sqlalchemy import bindparam
from sqlalchemy.sql.elements import ColumnElement

from backend.db.tables import sessions, tasks

_VALUE = "scope_value"


class ScopeKind(Enum):
    """One prebuilt statement per kind and per query."""

    SESSION = "session"
    TASK = "task"
    TASKS = "tasks"

    def clause(self, value: Any = None) -> ColumnElement[bool]:
        """The scope's condition on ``sessions``/``tasks``: bound to ``value`` when given,
        else to the ``scope_value`` parameter a prebuilt statement binds at execution."""
        if self is ScopeKind.SESSION:
            return sessions.c.id == _bound(value)
        if self is ScopeKind.TASK:
            return sessions.c.task_id == _bound(value)
        return tasks.c.id.in_(bindparam(_VALUE, expanding=True) if value is None else list(value))


def _bound(value: Any) -> Any:
    return bindparam(_VALUE) if value is None else value


@dataclass(frozen=True, slots=True)
class Scope:
    """The sessions of one session, of one task, or of several tasks."""

    kind: ScopeKind
    value: str | tuple[str, ...]

    @classmethod
    def session(cls, session_id: str) -> Scope:
        return cls(ScopeKind.SESSION, session_id)

    @classmethod
    def task(cls, task_id: str) -> Scope:
        return cls(ScopeKind.TASK, task_id)

    @classmethod
    def tasks(cls, task_ids: Sequence[str]) -> Scope:
        return cls(ScopeKind.TASKS, tuple(task_ids))

    def where(self) -> ColumnElement[bool]:
        """The scope as a plain clause (for a one-off statement of the caller's own)."""
        return self.kind.clause(self.value)

    def params(self) -> dict[str, Any]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {_VALUE: value}


#: A read's scope: a :class:`Scope` (prebuilt statement) or any clause (built per call).
Where = Scope | ColumnElement[bool]


def as_clause(where: Where) -> ColumnElement[bool]:
    """``where`` as a plain clause, for a one-off statement of the caller's own."""
    return where.where() if isinstance(where, Scope) else where


Stmt = TypeVar("Stmt")
_PREPARED: dict[tuple[Callable[..., Any], ScopeKind], Any] = {}


def prepared(
    build: Callable[[ColumnElement[bool]], Stmt], where: Where
) -> tuple[Stmt, dict[str, Any]]:
    """``build``'s statement for ``where`` and the parameters to execute it with.

    For a :class:`Scope`, the statement is built on first use and reused (SQLAlchemy then also
    reuses its compiled form). Two first uses racing only build it twice.
    """
    if not isinstance(where, Scope):
        return build(where), {}
    key = (build, where.kind)
    stmt = _PREPARED.get(key)
    if stmt is None:
        stmt = _PREPARED[key] = build(where.kind.clause())
    return stmt, where.params()
