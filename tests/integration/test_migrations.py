"""Alembic migrations create exactly the schema the models declare, on both databases."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy import inspect, select, text
from sqlmodel import SQLModel

from backend.authority.sql import active_bundles_of
from backend.db.engine import read_tx, sync_url
from backend.db.migrate import alembic_config, upgrade
from backend.db.tables import sessions
from backend.models import TaskSessionMessage
from backend.request_evidence import pending_id

_EXPLAIN = {"sqlite": "EXPLAIN QUERY PLAN", "postgresql": "EXPLAIN"}


def _diff(url: str) -> list:
    engine = create_sync_engine(sync_url(url))
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(context, SQLModel.metadata)
    finally:
        engine.dispose()


# SQLite cannot reflect expression indexes; the index is checked through query plans instead.
@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_migrated_schema_matches_the_models(database_url):
    assert _diff(database_url) == []


async def _plan(conn, statement) -> str:
    if conn.dialect.name == "postgresql":
        await conn.execute(text("SET LOCAL enable_seqscan = off"))
    sql = str(statement.compile(conn.sync_connection, compile_kwargs={"literal_binds": True}))
    rows = await conn.execute(text(f"{_EXPLAIN[conn.dialect.name]} {sql}"))
    return " ".join(str(row[-1]) for row in rows)


async def test_task_pending_projection_starts_from_the_open_request_index(engine):
    """Both databases must prove the partial index's predicate from the query's own."""
    statement = select(active_bundles_of(sessions.c.task_id == "t"))
    async with read_tx(engine) as conn:
        plan = await _plan(conn, statement)
    assert "ix_messages_open_requests" in plan


async def test_pending_id_lookups_use_the_expression_index(engine):
    """The json_text construct renders exactly the indexed expression on each dialect."""
    messages = TaskSessionMessage.__table__
    lookup = select(messages.c.id).where(pending_id(messages) == "p")
    async with read_tx(engine) as conn:
        plan = await _plan(conn, lookup)
    assert "ix_messages_pending_id" in plan


@pytest.mark.filterwarnings("ignore:.*expression-based index")
def test_downgrade_and_upgrade_round_trip(tmp_path):
    url = f"sqlite:///{tmp_path / 'round.db'}"
    upgrade(url)
    command.downgrade(alembic_config(url), "base")
    engine = create_sync_engine(url)
    try:
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    finally:
        engine.dispose()
    upgrade(url)
    assert _diff(url) == []
