"""Ids and the dialect-specific JSON expressions."""

from __future__ import annotations

import pytest
from sqlalchemy import column, select
from sqlalchemy.dialects import postgresql, sqlite

from backend.db.json import json_flag, json_text
from backend.ids import new_id


def test_ids_are_unique_fixed_length_strings():
    ids = {new_id() for _ in range(10_000)}
    assert len(ids) == 10_000
    assert {len(i) for i in ids} == {26}


def _sql(expr, dialect) -> str:
    return str(select(expr).compile(dialect=dialect))


def test_json_keys_render_as_literals_so_expression_indexes_match():
    expr = json_text(column("metadata"), "pending_id")
    assert "json_extract(metadata, '$.pending_id')" in _sql(expr, sqlite.dialect())
    assert "(metadata ->> 'pending_id')" in _sql(expr, postgresql.dialect())


def test_flag_accepts_the_four_true_forms_on_each_dialect():
    expr = json_flag(column("metadata"), "prompt_dispatch_attempted")
    assert "IN (1, '1', 'true')" in _sql(expr, sqlite.dialect())
    assert "IN ('true', '1')" in _sql(expr, postgresql.dialect())


@pytest.mark.parametrize("key", ["a'b", "a.b", "A", "", "x; drop"])
def test_unsafe_json_keys_are_refused(key):
    with pytest.raises(ValueError):
        json_text(column("metadata"), key)


def test_revision_json_uses_a_decimal_epoch():
    from backend.projections.revision import ProjectionRevision

    revision = ProjectionRevision(epoch=12345678901234567, sequence=3)
    assert revision.to_json() == {"epoch": "12345678901234567", "sequence": 3}
    assert ProjectionRevision.from_json(revision.to_json()) == revision
