"""One settings object for the backend, read from the environment (prefix ``KANDEV_``).

SQLite is the embedded default so that a fresh checkout runs with no server; PostgreSQL is
selected by pointing ``KANDEV_DATABASE_URL`` at a ``postgresql+psycopg://`` URL.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SQLITE_PATH = PROJECT_ROOT / ".data" / "kandev.db"


class Settings(BaseSettings):
    """Process-wide configuration; tests build their own instances instead of patching env."""

    model_config = SettingsConfigDict(env_prefix="KANDEV_", extra="ignore")

    database_url: str = f"sqlite+aiosqlite:///{DEFAULT_SQLITE_PATH}"
    sqlite_busy_timeout_ms: int = 10_000
    #: Database connections each process keeps open, and never more: a transaction that
    #: finds them all busy waits for one. No overflow connections are opened and closed per
    #: transaction: each cost PostgreSQL a backend process (fork, authentication, catalog
    #: caches) and SQLite a thread with its pragmas, which under 20 concurrent clients was a
    #: third of the database's CPU. Several workers on PostgreSQL keep ``workers x`` this many
    #: (``python -m backend.preflight`` checks they fit in ``max_connections``).
    db_pool_size: int = 20
    #: How long a prompt may wait for the agent's acknowledgement (an agent that is still
    #: starting by then did not take it).
    agentctl_ack_timeout_s: float = 10.0
    #: The agent profile of sessions that do not name one (``backend/agents/profiles.py``:
    #: ``mock``, ``claude-code``, ``codex`` or one from ``agent_profiles``).
    agent: str = "mock"
    #: A JSON file of extra agent profiles.
    agent_profiles: str | None = None
    #: Where the mock agent records every prompt it reads (the test API's prompt record).
    mock_record: str = str(PROJECT_ROOT / ".data" / "mock-agent-prompts.jsonl")
    #: How long a live answer may go without agent activity before it is re-sent as a prompt.
    primary_answer_watchdog_s: float = 30.0
    #: Test builds only: fault points and the mock agent's record under /api/v1/_test.
    test_api: bool = False
    #: Requests without a bearer token act as the local user (member of every workspace).
    single_user: bool = True
    #: Where agents call back: this app's own base URL.
    public_url: str = "http://127.0.0.1:3000"
    #: Several workers on one PostgreSQL database: their event bus (``nats://host:4222``).
    #: Unset: the in-memory bus of one process.
    nats_url: str | None = None
    #: Several workers: how often a live worker settles the leftovers of workers that died
    #: meanwhile (their resumes, claims, permission requests, unacknowledged turns).
    worker_sweep_s: float = 2.0
    #: Several workers: how often a worker checks it still holds its advisory lock, and stops
    #: if not (well below ``worker_sweep_s``: the others wait one sweep before taking over).
    worker_heartbeat_s: float = 0.5


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
