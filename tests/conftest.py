"""Shared fixtures: every database test runs once on SQLite and once on PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlmodel import SQLModel

from backend.db.engine import create_engine, write_tx
from backend.db.migrate import upgrade
from tests.model import profiles as _model_profiles  # noqa: F401  (Hypothesis profiles)
from tests.support import lock_witness, postgres
from tests.support.nats import nats_url  # noqa: F401  (fixture)
from tests.support.postgres import throwaway_postgres  # noqa: F401  (fixture, used on demand)

BACKENDS = ("sqlite", "postgres")
#: Rows that survive between tests: the durable counters and Alembic's version.
_KEPT_TABLES = {"kandev_meta", "alembic_version"}


@pytest.fixture(scope="session", params=BACKENDS)
def database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated database of each kind, created once per test session."""
    if request.param == "sqlite":
        path: Path = tmp_path_factory.mktemp("sqlite") / "kandev.db"
        url = f"sqlite+aiosqlite:///{path}"
        upgrade(url)
        yield url
        return
    with postgres.scratch_database(postgres.server_url(request)) as url:
        upgrade(url)
        yield url


@pytest.fixture(scope="session")
async def session_engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    lock_witness.attach(engine)
    yield engine
    await engine.dispose()


@pytest.fixture
async def engine(session_engine: AsyncEngine) -> AsyncIterator[AsyncEngine]:
    """The migrated database, emptied of data rows before each test."""
    await _truncate(session_engine)
    yield session_engine


async def _truncate(engine: AsyncEngine) -> None:
    tables = [
        t.name for t in reversed(SQLModel.metadata.sorted_tables) if t.name not in _KEPT_TABLES
    ]
    # The write lock up front, as every writer in the application takes it (see write_tx).
    async with write_tx(engine) as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text(f"TRUNCATE {', '.join(tables)} CASCADE"))
        else:
            for name in tables:
                await conn.execute(text(f"DELETE FROM {name}"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run last. Playwright's sync API keeps its own event loop running on the
    main thread for the whole session once a browser starts, and pytest-asyncio cannot start
    a test loop next to it; running them last also gives the fast levels' verdict first."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)
