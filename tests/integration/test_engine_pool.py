"""The engine's pool survives a driver connection stopped underneath it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text

from backend.db.engine import create_engine, write_tx


async def test_a_stopped_sqlite_connection_in_the_pool_is_replaced(tmp_path: Path) -> None:
    """aiosqlite's terminate path stops a connection's thread (closing it) while SQLAlchemy may
    still pool it; the next transaction must get a working connection, not "no active
    connection" (a CI failure in a test that merely truncated tables)."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'pool.db'}")
    try:
        async with engine.connect() as conn:
            raw = await conn.get_raw_connection()
            driver = raw.driver_connection
            await conn.execute(text("SELECT 1"))
        stopped = driver.stop()  # the pooled connection is closed underneath the pool
        if stopped is not None:
            await stopped
        async with write_tx(engine) as conn:
            assert (await conn.execute(text("SELECT 2"))).scalar_one() == 2
    finally:
        await engine.dispose()
