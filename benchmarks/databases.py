"""Where the benchmarks' rows go: the scratch databases and the bulk loaders.

Both benchmarks need the same things around their measurements: a throwaway SQLite file or
PostgreSQL database (kept with ``--keep``, dropped otherwise), the real schema from the Alembic
migrations so the product's indexes exist, and a bulk load of ``benchmarks.dataset``'s rows
that is fast enough at a million messages (``executemany`` / ``COPY``, then ``ANALYZE`` so the
planners see production-like statistics).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import psycopg
from sqlalchemy.engine import make_url

from backend.db.migrate import upgrade
from benchmarks.dataset import Data, pg_time, sqlite_time

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"

P = ParamSpec("P")
R = TypeVar("R")

# The column order of the generated row tuples (benchmarks.dataset), table by table.
WORKSPACE_COLS = ("id", "name", "created_at")
WORKFLOW_COLS = ("id", "workspace_id", "name", "created_at")
STEP_COLS = ("id", "workflow_id", "name", "position")
TASK_COLS = (
    "id",
    "workspace_id",
    "workflow_id",
    "workflow_step_id",
    "title",
    "description",
    "state",
    "created_at",
    "updated_at",
)
SESSION_COLS = (
    "id",
    "task_id",
    "state",
    "is_primary",
    "agent_profile",
    "prompt_generation",
    "pending_action",
    "created_at",
    "updated_at",
)
TURN_COLS = (
    "id",
    "session_id",
    "task_id",
    "prompt_generation",
    "started_at",
    "completed_at",
    "created_at",
    "metadata",
)
MESSAGE_COLS = (
    "id",
    "session_id",
    "task_id",
    "turn_id",
    "type",
    "author",
    "content",
    "metadata",
    "created_at",
)

TIME_COLUMNS = ("created_at", "updated_at", "started_at", "completed_at")


def libpq(url: str) -> str:
    """The SQLAlchemy URL as psycopg's own connection string (the raw driver takes no dialect)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def shown(url: str) -> str:
    """The URL as printed: never with its password."""
    return make_url(url).render_as_string(hide_password=True)


def run_databases(
    which: str,
    sqlite: Callable[P, R],
    postgres: Callable[P, R | None],
    *args: P.args,
    **kwargs: P.kwargs,
) -> list[R] | None:
    """The runs ``--db sqlite|postgres|both`` asks for, in that order, each called with ``args``.

    An unreachable PostgreSQL is skipped with ``both``, but when it was the only database asked
    for there is nothing to report: None, and the benchmark exits non-zero.
    """
    results: list[R] = []
    if which in ("sqlite", "both"):
        results.append(sqlite(*args, **kwargs))
    if which in ("postgres", "both"):
        pg = postgres(*args, **kwargs)
        if pg is not None:
            results.append(pg)
        elif which == "postgres":
            return None
    return results


@contextmanager
def scratch_sqlite(prefix: str, filename: str, keep: bool) -> Iterator[Path]:
    """A database file in a new temporary folder, removed afterwards unless ``keep``."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    path = workdir / filename
    try:
        yield path
    finally:
        if keep:
            print(f"[sqlite] kept {path}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def postgres_server() -> str | None:
    """The server of ``KANDEV_BENCH_POSTGRES_URL`` (or the local one) if it answers.

    An unreachable server is not an error: the reason is printed and the run goes on with
    SQLite alone.
    """
    server = os.environ.get("KANDEV_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        psycopg.connect(libpq(server), autocommit=True, connect_timeout=5).close()
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(
            f"[postgres] PostgreSQL at {shown(server)} is unreachable ({reason}); "
            "skipping PostgreSQL (set KANDEV_BENCH_POSTGRES_URL to point elsewhere)."
        )
        return None
    return server


@contextmanager
def scratch_postgres(server: str, prefix: str, keep: bool) -> Iterator[tuple[str, str]]:
    """A new database ``<prefix><random>`` on ``server``, as ``(name, url)``; dropped afterwards
    (even when connections are still open) unless ``keep``."""
    name = f"{prefix}{uuid.uuid4().hex[:10]}"
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(libpq(server), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, url
    finally:
        if keep:
            print(f"[postgres] kept database {name}: {shown(url)}")
        else:
            with psycopg.connect(libpq(server), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _tables(data: Data) -> list[tuple[str, tuple[str, ...], list[tuple[Any, ...]]]]:
    """``(table, columns, rows)`` in an order that satisfies the foreign keys."""
    return [
        ("workspaces", WORKSPACE_COLS, data.workspaces),
        ("workflows", WORKFLOW_COLS, data.workflows),
        ("workflow_steps", STEP_COLS, data.steps),
        ("tasks", TASK_COLS, data.tasks),
        ("task_sessions", SESSION_COLS, data.sessions),
        ("task_session_turns", TURN_COLS, data.turns),
        ("task_session_messages", MESSAGE_COLS, data.messages),
    ]


def _converted(
    cols: tuple[str, ...], rows: Iterable[tuple[Any, ...]], fmt: Callable[[Any], Any]
) -> Iterator[tuple[Any, ...]]:
    """The rows with their integer-microsecond times written by ``fmt`` for the database."""
    times = [i for i, c in enumerate(cols) if c in TIME_COLUMNS]
    for row in rows:
        out = list(row)
        for i in times:
            out[i] = fmt(out[i])
        yield tuple(out)


def load_sqlite(path: Path, data: Data) -> None:
    """Migrate the file and bulk load the rows with durability off (it is thrown away)."""
    upgrade(f"sqlite:///{path}")
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("PRAGMA cache_size=-262144")
        con.execute("BEGIN")
        for name, cols, rows in _tables(data):
            marks = ", ".join("?" for _ in cols)
            con.executemany(
                f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({marks})",
                _converted(cols, rows, sqlite_time),
            )
        con.execute("COMMIT")
        con.execute("ANALYZE")
        con.execute("PRAGMA journal_mode=WAL")  # what the product's engine uses
    finally:
        con.close()


def load_postgres(url: str, data: Data) -> None:
    """Migrate the database and ``COPY`` the rows in one transaction."""
    upgrade(url)
    with psycopg.connect(libpq(url)) as con:
        with con.cursor() as cur:
            for name, cols, rows in _tables(data):
                with cur.copy(f"COPY {name} ({', '.join(cols)}) FROM STDIN") as copy:
                    for row in _converted(cols, rows, pg_time):
                        copy.write_row(row)
        con.commit()
        con.autocommit = True
        con.execute("VACUUM ANALYZE")
