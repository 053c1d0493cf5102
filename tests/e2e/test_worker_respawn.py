"""A backend worker of the real app (``reflex run --env prod``, Granian) that dies is replaced,
and the app never stops serving (``kandev_app/supervision.py``): with one worker the app comes
back by itself on SQLite and PostgreSQL; with two (PostgreSQL, NATS, Redis) the other worker
answers throughout, also when a worker stops itself because its lock session was cut.
Granian's default was to stop every worker when one died."""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.e2e.server import AppServer
from tests.support.postgres import libpq_url
from tests.support.processes import free_port

pytestmark = pytest.mark.e2e

REDIS_URL = os.environ.get("KANDEV_TEST_REDIS_URL", "redis://127.0.0.1:6379")
RESPAWN_WITHIN_S = 60.0


def children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.add(int(entry.name))
    return found


def workers(server: AppServer) -> set[int]:
    """The app's Granian workers: the Reflex process's children but multiprocessing's
    resource tracker."""
    assert server._proc is not None
    pids = set()
    for pid in children(server._proc.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"resource_tracker" not in command:
            pids.add(pid)
    return pids


def healthy(server: AppServer, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while True:
        try:
            with urllib.request.urlopen(f"{server.url}/api/v1/health", timeout=2) as response:
                if response.status == 200:
                    return True
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def wait_for_workers(server: AppServer, count: int, without: set[int]) -> set[int]:
    deadline = time.monotonic() + RESPAWN_WITHIN_S
    while True:
        now = workers(server)
        if len(now) == count and not now & without:
            return now
        assert server.running, f"the app stopped; its log:\n{server.log_tail()}"
        assert time.monotonic() < deadline, f"workers now {now}; log:\n{server.log_tail()}"
        time.sleep(0.2)


def test_the_only_worker_is_replaced_and_the_app_serves_again(app_server: AppServer):
    (worker,) = wait_for_workers(app_server, 1, set())
    os.kill(worker, signal.SIGKILL)
    wait_for_workers(app_server, 1, {worker})
    assert healthy(app_server, RESPAWN_WITHIN_S), app_server.log_tail()
    assert app_server.running


def _redis_answers() -> bool:
    host, _, port = REDIS_URL.removeprefix("redis://").split("/")[0].partition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port or 6379)), 2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def two_workers(
    e2e_database_url: str,
    e2e_web_dir: Path,
    nats_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AppServer]:
    if not e2e_database_url.startswith("postgresql"):
        pytest.skip("several workers serve PostgreSQL only")
    if not _redis_answers():
        reason = f"several Reflex workers need Redis at {REDIS_URL}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    server = AppServer(
        database_url=e2e_database_url,
        port=free_port(),
        web_dir=e2e_web_dir,
        work_dir=tmp_path_factory.mktemp("e2e-two-workers"),
        # What scripts/run sets for KANDEV_WORKERS=2.
        extra_env={
            "GRANIAN_WORKERS": "2",
            "KANDEV_NATS_URL": nats_url,
            "REFLEX_REDIS_URL": REDIS_URL,
            "REFLEX_BACKEND_START_METHOD": "spawn",
        },
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_dead_worker_is_replaced_while_the_other_serves_on(two_workers: AppServer):
    before = wait_for_workers(two_workers, 2, set())
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    # Every probe while the replacement starts is answered (by the surviving worker).
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert healthy(two_workers, within_s=1.0), two_workers.log_tail()
        time.sleep(0.2)
    after = wait_for_workers(two_workers, 2, {victim})
    assert before - {victim} <= after
    assert healthy(two_workers, within_s=5.0)


def test_a_worker_that_lost_its_lock_session_is_replaced(
    two_workers: AppServer, e2e_database_url: str
):
    """One worker's lock session is ended under it (a PostgreSQL restart, a cut connection):
    that worker stops itself, Granian starts another, and the other serves throughout."""
    before = wait_for_workers(two_workers, 2, set())
    with psycopg.connect(libpq_url(e2e_database_url), autocommit=True) as conn:
        (cut,) = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name LIKE 'kandev worker %'"
            " ORDER BY pid LIMIT 1"
        ).fetchall()
    assert cut == (True,)
    deadline = time.monotonic() + RESPAWN_WITHIN_S
    while (after := workers(two_workers)) >= before:
        assert healthy(two_workers, within_s=1.0), two_workers.log_tail()
        assert time.monotonic() < deadline, f"no worker stopped; log:\n{two_workers.log_tail()}"
        time.sleep(0.1)
    (stopped,) = before - after
    wait_for_workers(two_workers, 2, {stopped})
    assert healthy(two_workers, within_s=5.0)
