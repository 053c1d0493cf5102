"""Where the PostgreSQL half of the suite gets its server.

In order: ``KANDEV_TEST_POSTGRES_URL``; the local server at 127.0.0.1:5432 when it answers; a
throwaway server that pytest-postgresql starts from the ``postgresql`` package binaries
(``KANDEV_TEST_POSTGRES_THROWAWAY=1`` skips the local server to exercise this path). Under
``CI=true`` no server is a failure, never a silent skip. Each test session creates its own
databases on that server and drops them afterwards. And what a restart does to a worker's
lock session (:func:`cut_worker_lock_connection`).
"""

from __future__ import annotations

import glob
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import sqlalchemy
from pytest_postgresql import factories
from sqlalchemy.engine import make_url

LOCAL_SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL as libpq (psycopg) takes it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _pg_ctl() -> str | None:
    found = shutil.which("pg_ctl") or sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if isinstance(found, list):
        return found[-1] if found else None
    return found


throwaway_postgres = factories.postgresql_proc(executable=_pg_ctl(), port=None)


def missing(reason: str) -> None:
    """Skip outside CI; fail in CI, where PostgreSQL must be tested."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL is required under CI=true: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL not available: {reason}")


def server_url(request: pytest.FixtureRequest) -> str:
    """A URL to a maintenance database on a running server (see module docstring)."""
    configured = os.environ.get("KANDEV_TEST_POSTGRES_URL")
    if configured:
        if not _answers(configured):
            missing(f"KANDEV_TEST_POSTGRES_URL={configured!r} does not answer")
        return configured
    force_throwaway = os.environ.get("KANDEV_TEST_POSTGRES_THROWAWAY") == "1"
    if not force_throwaway and _answers(LOCAL_SERVER):
        return LOCAL_SERVER
    if _pg_ctl() is None:
        missing("no server at 127.0.0.1:5432 and no pg_ctl to start one (apt: postgresql)")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        missing("no server at 127.0.0.1:5432, and initdb refuses to start one as root")
    proc = request.getfixturevalue("throwaway_postgres")
    return f"postgresql+psycopg://{proc.user}@{proc.host}:{proc.port}/postgres"


@contextmanager
def scratch_database(server: str) -> Iterator[str]:
    """Create a uniquely named database for this test session; drop it afterwards."""
    name = f"kandev_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(server), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(libpq_url(server), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def cut_worker_lock_connection(engine: Any, worker: str) -> None:
    """What a database restart or a cut network does to ``worker``'s advisory-lock session
    (``backend/workers.py`` names it ``kandev worker <id>``): the server ends it."""
    async with engine.connect() as conn:
        cut = await conn.execute(
            sqlalchemy.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = :name"
            ),
            {"name": f"kandev worker {worker}"},
        )
        assert cut.scalars().all() == [True], f"no lock session of worker {worker}"
        await conn.commit()
