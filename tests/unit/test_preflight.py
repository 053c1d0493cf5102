"""``scripts/run`` with ``KANDEV_WORKERS`` above 1 refuses, in one line naming the variable to
set, a run whose servers are missing: never a traceback from inside a worker, never a silent run
on one worker. Closed ports stand in for absent servers, so no server is needed here."""

from __future__ import annotations

import pytest

from backend.config import Settings
from backend.preflight import (
    CONNECTION_HEADROOM,
    PROBLEM_EXIT,
    Capacity,
    Plan,
    PreflightError,
    main,
    nats_answers,
    postgres_answers,
    postgres_capacity,
    preflight,
    redis_answers,
)
from tests.support.processes import free_port

POSTGRES = "postgresql+psycopg://me:secret@127.0.0.1:5432/kandev"
NATS = "nats://127.0.0.1:4222"
REDIS = "redis://127.0.0.1:6379"


def answers(_url: str, _timeout_s: float) -> None:
    """A probe of a server that is up."""
    return None


def unknown(_url: str, _timeout_s: float) -> None:
    """A capacity probe that could not tell."""
    return None


def accepts(connections: int) -> Capacity:
    """A capacity probe of a server accepting ``connections``."""
    return lambda _url, _timeout_s: connections


def never(url: str, _timeout_s: float) -> None:
    raise AssertionError(f"no server should be asked ({url})")


def settings(database_url: str = POSTGRES, nats_url: str | None = NATS) -> Settings:
    return Settings(database_url=database_url, nats_url=nats_url)


def test_one_worker_checks_nothing() -> None:
    """One worker runs as it always did, SQLite included."""
    sqlite = settings("sqlite+aiosqlite:///kandev.db", nats_url=None)
    assert preflight(1, sqlite, None, postgres=never, nats_probe=never, redis_probe=never) is None


def test_several_workers_on_sqlite_are_refused_before_any_server_is_asked() -> None:
    sqlite = settings("sqlite+aiosqlite:///kandev.db")
    with pytest.raises(PreflightError) as refused:
        preflight(2, sqlite, REDIS, postgres=never, nats_probe=never, redis_probe=never)
    message = str(refused.value)
    assert "\n" not in message
    assert "KANDEV_WORKERS=2 needs PostgreSQL" in message
    assert "SQLite" in message
    assert "KANDEV_DATABASE_URL=postgresql+psycopg://" in message


@pytest.mark.parametrize(
    ("nats_url", "redis_url", "variable"),
    [(None, REDIS, "KANDEV_NATS_URL"), (NATS, None, "REFLEX_REDIS_URL")],
)
def test_a_missing_url_names_its_variable(
    nats_url: str | None, redis_url: str | None, variable: str
) -> None:
    with pytest.raises(PreflightError, match=f"set {variable}="):
        preflight(
            3,
            settings(nats_url=nats_url),
            redis_url,
            postgres=never,
            nats_probe=never,
            redis_probe=never,
        )


def test_a_redis_url_reflex_would_refuse_is_refused_here() -> None:
    with pytest.raises(PreflightError, match="REFLEX_REDIS_URL='http://"):
        preflight(2, settings(), "http://127.0.0.1:6379", postgres=never)


def test_an_unreachable_nats_server_is_named_with_its_url_and_variable() -> None:
    closed = f"nats://127.0.0.1:{free_port()}"
    with pytest.raises(PreflightError) as refused:
        preflight(
            2,
            settings(nats_url=closed),
            REDIS,
            timeout_s=1,
            postgres=answers,
            nats_probe=nats_answers,
            redis_probe=never,
            capacity=unknown,
        )
    message = str(refused.value)
    assert "\n" not in message
    assert f"no NATS server answers at {closed}" in message
    assert "KANDEV_NATS_URL" in message


def test_unreachable_postgres_and_redis_say_why_and_hide_the_password() -> None:
    port = free_port()
    closed_pg = f"postgresql+psycopg://me:secret@127.0.0.1:{port}/kandev"
    with pytest.raises(PreflightError) as refused:
        preflight(2, settings(closed_pg), REDIS, timeout_s=1, postgres=postgres_answers)
    message = str(refused.value)
    assert f"PostgreSQL at postgresql+psycopg://me:***@127.0.0.1:{port}/kandev" in message
    assert "refused" in message
    assert "secret" not in message

    closed_redis = f"redis://127.0.0.1:{free_port()}"
    with pytest.raises(PreflightError, match=f"Redis at {closed_redis} does not answer"):
        preflight(
            2,
            settings(),
            closed_redis,
            timeout_s=1,
            postgres=answers,
            nats_probe=answers,
            capacity=unknown,
        )
    assert redis_answers(closed_redis, 1) is not None


def test_all_answering_gives_the_plan() -> None:
    plan = preflight(
        4,
        settings(),
        REDIS,
        postgres=answers,
        nats_probe=answers,
        redis_probe=answers,
        capacity=accepts(4 * 20 + CONNECTION_HEADROOM),
    )
    assert plan == Plan(4, POSTGRES, NATS, REDIS)
    assert "secret" not in plan.summary()


def test_pools_that_would_not_fit_in_postgres_are_refused_with_a_pool_size_that_fits() -> None:
    """Five workers keeping 20 connections each do not fit in PostgreSQL's default 100
    (97 for ordinary roles): the line names the pool size that would."""
    with pytest.raises(PreflightError) as refused:
        preflight(5, settings(), REDIS, postgres=answers, nats_probe=never, capacity=accepts(97))
    message = str(refused.value)
    assert "\n" not in message
    assert "5 x KANDEV_DB_POOL_SIZE=20 = 100" in message
    assert "PostgreSQL accepts 97" in message
    assert "set KANDEV_DB_POOL_SIZE=17 or less" in message

    many = Settings(database_url=POSTGRES, nats_url=NATS, db_pool_size=2)
    with pytest.raises(PreflightError, match="run fewer workers"):
        preflight(60, many, REDIS, postgres=answers, nats_probe=never, capacity=accepts(97))


def test_the_capacity_is_read_from_the_server(database_url: str) -> None:
    """On this machine's PostgreSQL (the default 100, 3 reserved for superusers)."""
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only")
    accepted = postgres_capacity(database_url, 3)
    assert accepted is not None and 0 < accepted < 10_000
    assert postgres_capacity(f"postgresql+psycopg://me@127.0.0.1:{free_port()}/x", 1) is None


def test_the_entry_point_prints_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What ``scripts/run`` prints as its error."""
    monkeypatch.setenv("KANDEV_DATABASE_URL", "sqlite+aiosqlite:///kandev.db")
    monkeypatch.setenv("KANDEV_NATS_URL", NATS)
    monkeypatch.setenv("REFLEX_REDIS_URL", REDIS)
    assert main(["--workers", "2"]) == PROBLEM_EXIT
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert out.startswith("KANDEV_WORKERS=2 needs PostgreSQL")
