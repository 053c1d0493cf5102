"""Schema upgrades through Alembic, on SQLite and PostgreSQL alike.

Synchronous by nature (Alembic is); callers on an event loop run it in a worker thread.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from backend.db.engine import _ensure_sqlite_dir, is_sqlite, sync_url

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation would eat '%' in passwords.
    config.set_main_option("sqlalchemy.url", sync_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    if is_sqlite(url):
        _ensure_sqlite_dir(url)
    command.upgrade(alembic_config(url), revision)
