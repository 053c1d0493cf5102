"""Dialect-specific reads and updates of keys inside JSON metadata columns.

The spec stores clarification and reservation state in JSON metadata, and older writers stored
boolean flags as ``true``, ``"true"``, ``"1"`` or ``1``. Every query that reads such a key goes
through these two constructs so SQLite and PostgreSQL agree, and so expression indexes (which
need the exact same expression text) are hit. Keys are rendered as literals, never bound
parameters, for the same reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import Boolean, String, TypeDecorator, bindparam
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.sql.visitors import InternalTraversal

_KEY = re.compile(r"^[a-z_][a-z0-9_]*$")


def _checked(key: str) -> str:
    if not _KEY.match(key):
        raise ValueError(f"unsafe JSON key {key!r}")
    return key


class _JsonKeyElement(FunctionElement[Any]):
    """A function of one JSON column and one literal key.

    The key is part of the SQL text, so it must be part of SQLAlchemy's statement cache key;
    without it, ``metadata.a`` and ``metadata.b`` would share one compiled statement.
    """

    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy's declaration style
        *FunctionElement._traverse_internals,
        ("key", InternalTraversal.dp_string),
    ]
    inherit_cache = True

    def __init__(self, column: ColumnElement[Any], key: str) -> None:
        self.key = _checked(key)
        super().__init__(column)


class json_text(_JsonKeyElement):
    """``metadata.key`` as SQL text (strings unquoted), NULL when absent."""

    type = String()
    inherit_cache = True


class json_flag(_JsonKeyElement):
    """True when ``metadata.key`` is boolean true, ``"true"``, ``"1"`` or numeric 1."""

    type = Boolean()
    inherit_cache = True


def _column_sql(element: FunctionElement[Any], compiler: Any, **kw: Any) -> str:
    (column,) = element.clauses.clauses
    return compiler.process(column, **kw)


@compiles(json_text, "sqlite")
def _json_text_sqlite(element: json_text, compiler: Any, **kw: Any) -> str:
    return f"json_extract({_column_sql(element, compiler, **kw)}, '$.{element.key}')"


@compiles(json_text, "postgresql")
def _json_text_pg(element: json_text, compiler: Any, **kw: Any) -> str:
    return f"({_column_sql(element, compiler, **kw)} ->> '{element.key}')"


@compiles(json_flag, "sqlite")
def _json_flag_sqlite(element: json_flag, compiler: Any, **kw: Any) -> str:
    # json_extract yields integer 1 for JSON true and for the number 1, text for the strings.
    path = f"json_extract({_column_sql(element, compiler, **kw)}, '$.{element.key}')"
    return f"(coalesce({path} IN (1, '1', 'true'), 0) = 1)"


@compiles(json_flag, "postgresql")
def _json_flag_pg(element: json_flag, compiler: Any, **kw: Any) -> str:
    # ->> renders JSON true as 'true' and the number 1 as '1', same as the string forms.
    text = f"({_column_sql(element, compiler, **kw)} ->> '{element.key}')"
    return f"(coalesce({text} IN ('true', '1'), false))"


class _Patch(TypeDecorator[Any]):
    """A :class:`json_merge` patch (a dict) sent as JSON text in the form each dialect's SQL
    takes: SQLite's ``json_patch`` (RFC 7396) removes the keys whose value is null, while
    PostgreSQL's ``||`` gets only the kept keys (the removed ones, ``removed``, are subtracted
    in the SQL text, so they are fixed where the statement is built)."""

    impl = String
    cache_ok = True

    def __init__(self, removed: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.removed = removed

    def process_bind_param(self, value: Any, dialect: Dialect) -> str:
        unexpected = [k for k, v in value.items() if v is None and k not in self.removed]
        if unexpected:
            raise ValueError(f"keys {unexpected!r} removed but not declared by the statement")
        kept = {k: v for k, v in value.items() if v is not None}
        if dialect.name == "postgresql":
            return json.dumps(kept)
        return json.dumps({**kept, **{k: None for k in self.removed if k not in kept}})


def patch_param(name: str, removed: Iterable[str] = ()) -> BindParameter[Any]:
    """A :class:`json_merge` patch bound at execution, for a statement built once: the dict
    passed as ``name`` may set any keys, and may remove (``None``) only keys in ``removed``,
    which are always removed (the PostgreSQL SQL text names them)."""
    return bindparam(name, type_=_Patch(tuple(sorted(_checked(k) for k in removed))))


class json_merge(FunctionElement[Any]):
    """``metadata`` with top-level keys set (or removed, for ``None`` values), in one UPDATE.

    Written as one expression so claims stay single statements (``UPDATE ... SET metadata =
    json_merge(metadata, {...}) WHERE <rule> RETURNING``) instead of read-modify-write.
    ``patch`` is the dict itself, or a :func:`patch_param` a prebuilt statement binds.
    """

    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy's declaration style
        *FunctionElement._traverse_internals,
        ("removed", InternalTraversal.dp_string_list),
    ]
    inherit_cache = True

    def __init__(
        self, column: ColumnElement[Any], patch: Mapping[str, Any] | BindParameter[Any]
    ) -> None:
        if not isinstance(patch, BindParameter):
            for key in patch:
                _checked(key)
            removed = tuple(sorted(k for k, v in patch.items() if v is None))
            patch = bindparam(None, dict(patch), type_=_Patch(removed))
        self.removed = list(patch.type.removed)
        super().__init__(column, patch)


@compiles(json_merge, "sqlite")
def _json_merge_sqlite(element: json_merge, compiler: Any, **kw: Any) -> str:
    column, patch = element.clauses.clauses
    return f"json_patch({compiler.process(column, **kw)}, {compiler.process(patch, **kw)})"


@compiles(json_merge, "postgresql")
def _json_merge_pg(element: json_merge, compiler: Any, **kw: Any) -> str:
    column, patch = element.clauses.clauses
    target = compiler.process(column, **kw)
    for key in element.removed:
        target = f"({target} - '{key}')"
    return f"({target} || CAST({compiler.process(patch, **kw)} AS JSONB))"
