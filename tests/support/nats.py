"""Where tests get a NATS server (the multi-worker event bus and waiter channel).

In order: ``KANDEV_TEST_NATS_URL``; the local server at 127.0.0.1:4222 when it answers; a
throwaway ``nats-server`` (the Debian package ``nats-server``; ``scripts/test`` installs it
when it can) started for the test session on a free port. Under ``CI=true`` no server is a
failure, never a silent skip.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from tests.support.processes import free_port

LOCAL_SERVER = "nats://127.0.0.1:4222"
START_TIMEOUT_S = 10.0


def answers(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 4222), 2):
            return True
    except OSError:
        return False


def missing(reason: str) -> None:
    """Skip outside CI; fail in CI, where several workers must be tested."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"NATS is required under CI=true: {reason}", pytrace=False)
    pytest.skip(f"NATS not available: {reason}")


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    configured = os.environ.get("KANDEV_TEST_NATS_URL")
    if configured:
        if not answers(configured):
            missing(f"KANDEV_TEST_NATS_URL={configured!r} does not answer")
        yield configured
        return
    if answers(LOCAL_SERVER):
        yield LOCAL_SERVER
        return
    binary = shutil.which("nats-server") or shutil.which("/usr/sbin/nats-server")
    if binary is None:
        missing("no server at 127.0.0.1:4222 and no nats-server to start (apt: nats-server)")
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    server = subprocess.Popen(
        [binary, "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not answers(url):
            if server.poll() is not None or time.monotonic() > deadline:
                missing(f"nats-server did not start on port {port}")
            time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(5)
