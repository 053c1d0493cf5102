"""Pre-flight checks for several workers: ``python -m backend.preflight --workers N``.

``scripts/run`` calls this before it builds anything when ``KANDEV_WORKERS`` is above 1. Several
workers need three servers: PostgreSQL (one database shared by every worker; SQLite serves one
process), NATS (their event bus, ``KANDEV_NATS_URL``) and Redis (Reflex keeps every tab's UI
state there, ``REFLEX_REDIS_URL``, and runs one backend worker without it). Each is asked
whether it answers *before* the frontend build and the workers start, so a missing one is one
clear line naming it and the variable that points at it, not a traceback from inside a worker
minutes later, and never a silent run on fewer workers. PostgreSQL is also asked how many
connections it accepts: every worker keeps up to ``KANDEV_DB_POOL_SIZE`` open, and pools that
would not fit are refused with a size that does.

On success the one-line summary goes to stdout; on a problem the one-line message goes to stdout
and the exit status is 2 (``scripts/run`` prints it as its error). Anything else (a crash) exits
1 with its traceback on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import NullPool, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from backend.config import Settings
from backend.db.engine import sync_url

#: How long each server may take to answer before it counts as absent.
TIMEOUT_S = 3.0
#: Reflex reads its Redis URL from this variable (``reflex_base.config``: prefix ``REFLEX_``).
REDIS_ENV = "REFLEX_REDIS_URL"
#: The URL schemes Reflex accepts for Redis (``reflex.utils.prerequisites.parse_redis_url``);
#: checked here so a wrong one is refused before the build, not by every worker.
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
EXAMPLE_DATABASE = "postgresql+psycopg://me@127.0.0.1:5432/kandev"

#: Exit status of a configuration problem (1 stays a crash's).
PROBLEM_EXIT = 2


class PreflightError(Exception):
    """A configuration problem, worded as the one line the operator reads."""


@dataclass(frozen=True)
class Plan:
    """What a several-worker run will use (each URL already checked to answer)."""

    workers: int
    database_url: str
    nats_url: str
    redis_url: str

    def summary(self) -> str:
        return (
            f"{self.workers} workers on PostgreSQL {_shown(self.database_url)}, "
            f"NATS {self.nats_url}, Redis {_shown(self.redis_url)}"
        )


def _shown(url: str) -> str:
    """``url`` without its password (these lines end up in terminals and logs)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _reason(error: BaseException) -> str:
    """The first line of an error's own message: the part that says what is wrong."""
    cause = getattr(error, "orig", None) or error
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return lines[0] if lines else type(cause).__name__


def check_configuration(
    workers: int, database_url: str, nats_url: str | None, redis_url: str | None
) -> Plan:
    """The checks that need no server: which variables are missing or point at the wrong kind."""
    prefix = f"KANDEV_WORKERS={workers}"
    try:
        backend = make_url(database_url).get_backend_name()
    except ArgumentError:
        backend = ""
    if backend != "postgresql":
        kind = "SQLite" if backend == "sqlite" else f"not PostgreSQL ({_shown(database_url)})"
        raise PreflightError(
            f"{prefix} needs PostgreSQL, but the database is {kind} (SQLite serves one process):"
            f" set KANDEV_DATABASE_URL={EXAMPLE_DATABASE}, or run one worker (KANDEV_WORKERS=1)"
        )
    if not nats_url:
        raise PreflightError(
            f"{prefix} needs a NATS server for the workers' event bus:"
            " set KANDEV_NATS_URL=nats://127.0.0.1:4222"
        )
    if not redis_url:
        raise PreflightError(
            f"{prefix} needs Redis for Reflex's UI state (Reflex runs one worker without it):"
            f" set {REDIS_ENV}=redis://127.0.0.1:6379"
        )
    if not redis_url.startswith(REDIS_SCHEMES):
        raise PreflightError(
            f"{prefix}: {REDIS_ENV}={redis_url!r} must start with {', '.join(REDIS_SCHEMES)}"
        )
    return Plan(workers, database_url, nats_url, redis_url)


def postgres_answers(url: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """None when the database accepts a query, else why not (no server, no such database)."""
    engine = create_engine(
        sync_url(url), poolclass=NullPool, connect_args={"connect_timeout": max(1, timeout_s)}
    )
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        return _reason(error)
    finally:
        engine.dispose()
    return None


def postgres_capacity(url: str, timeout_s: float = TIMEOUT_S) -> int | None:
    """How many connections PostgreSQL accepts from ordinary roles (``max_connections`` less
    the reserved ones); None when that cannot be read (the run then is not refused for it)."""
    engine = create_engine(
        sync_url(url), poolclass=NullPool, connect_args={"connect_timeout": max(1, timeout_s)}
    )
    try:
        with engine.connect() as conn:
            return int(conn.execute(_CAPACITY).scalar_one())
    except (SQLAlchemyError, TypeError, ValueError):
        return None
    finally:
        engine.dispose()


#: ``reserved_connections`` exists from PostgreSQL 16 (missing: NULL, counted as 0).
_CAPACITY = text(
    "SELECT current_setting('max_connections')::int"
    " - current_setting('superuser_reserved_connections')::int"
    " - coalesce(current_setting('reserved_connections', true), '0')::int"
)


def nats_answers(url: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """None when a NATS server completes the client handshake at ``url``, else why not.

    The real client is used (as ``NatsEventBus`` connects), so a URL's scheme, TLS and
    credentials are judged the way the workers will judge them."""
    import nats

    errors: list[Exception] = []

    async def _remember(error: Exception) -> None:
        """The client reports each failed attempt; the last one says why (refused, auth...)."""
        errors.append(error)

    async def _connect() -> str | None:
        started = time.monotonic()
        try:
            async with asyncio.timeout(timeout_s * 2):
                # One retry per server, soon: nats-py reads ``max_reconnect_attempts=0`` as
                # "retry forever", and its first connection retries too.
                client = await nats.connect(
                    url,
                    connect_timeout=timeout_s,
                    allow_reconnect=False,
                    max_reconnect_attempts=1,
                    reconnect_time_wait=0.2,
                    error_cb=_remember,
                )
        except Exception as error:
            last = errors[-1] if errors else error
            if str(last):
                return _reason(last)
            if isinstance(last, TimeoutError):
                return f"no answer within {time.monotonic() - started:.0f} s"
            return type(last).__name__
        await client.close()
        return None

    return asyncio.run(_connect())


def redis_answers(url: str, timeout_s: float = TIMEOUT_S) -> str | None:
    """None when Redis answers PING at ``url``, else why not."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        client.ping()
    except redis.RedisError as error:
        return _reason(error)
    finally:
        client.close()
    return None


Probe = Callable[[str, float], str | None]
Capacity = Callable[[str, float], int | None]

#: Connections left beside the workers' pools: psql sessions, the CLI, a migration.
CONNECTION_HEADROOM = 10


def preflight(
    workers: int,
    settings: Settings,
    redis_url: str | None,
    *,
    timeout_s: float = TIMEOUT_S,
    postgres: Probe = postgres_answers,
    nats_probe: Probe = nats_answers,
    redis_probe: Probe = redis_answers,
    capacity: Capacity = postgres_capacity,
) -> Plan | None:
    """Everything a run of ``workers`` workers needs, checked; None for one worker (nothing
    to check: one worker runs as it always did). The probes are parameters so tests can judge
    the wording without servers."""
    if workers < 1:
        raise PreflightError(f"KANDEV_WORKERS must be 1 or more (got {workers})")
    if workers == 1:
        return None
    plan = check_configuration(workers, settings.database_url, settings.nats_url, redis_url)
    prefix = f"KANDEV_WORKERS={workers}"
    if (why := postgres(plan.database_url, timeout_s)) is not None:
        raise PreflightError(
            f"{prefix}: PostgreSQL at {_shown(plan.database_url)} does not answer ({why}):"
            " start it (and create the database), or set KANDEV_DATABASE_URL"
        )
    _check_capacity(prefix, workers, settings.db_pool_size, capacity(plan.database_url, timeout_s))
    if (why := nats_probe(plan.nats_url, timeout_s)) is not None:
        raise PreflightError(
            f"{prefix}: no NATS server answers at {plan.nats_url} ({why}):"
            " start nats-server, or set KANDEV_NATS_URL=nats://host:4222"
        )
    if (why := redis_probe(plan.redis_url, timeout_s)) is not None:
        raise PreflightError(
            f"{prefix}: Redis at {_shown(plan.redis_url)} does not answer ({why}):"
            f" start redis-server, or set {REDIS_ENV}=redis://host:6379"
        )
    return plan


def _check_capacity(prefix: str, workers: int, pool_size: int, accepted: int | None) -> None:
    """Every worker keeps up to ``pool_size`` connections open: refuse a run whose pools
    would not fit, before it fails under load with "too many clients"."""
    if accepted is None:
        return
    kept = workers * pool_size
    if kept + CONNECTION_HEADROOM <= accepted:
        return
    fits = (accepted - CONNECTION_HEADROOM) // workers
    remedy = (
        f"set KANDEV_DB_POOL_SIZE={fits} or less, or raise max_connections"
        if fits >= 2
        else "run fewer workers, or raise max_connections"
    )
    raise PreflightError(
        f"{prefix}: the workers keep up to {workers} x KANDEV_DB_POOL_SIZE={pool_size} = {kept}"
        f" database connections (and {CONNECTION_HEADROOM} more are left for tools), but"
        f" PostgreSQL accepts {accepted}: {remedy}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.preflight", description=__doc__)
    parser.add_argument("--workers", type=int, required=True, help="backend workers to run")
    args = parser.parse_args(argv)
    try:
        plan = preflight(args.workers, Settings(), os.environ.get(REDIS_ENV) or None)
    except PreflightError as problem:
        print(problem)
        return PROBLEM_EXIT
    print(plan.summary() if plan else "one worker: nothing to check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
