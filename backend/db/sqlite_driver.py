"""aiosqlite with one thread round trip per statement.

aiosqlite runs each SQLite connection on a thread of its own and hands every call to it
through a queue, waking the event loop for each answer. SQLAlchemy's stock adaptation makes
four such calls per statement (open a cursor, execute, fetch, close), and the pool adds two
per transaction: a pre-ping ``SELECT 1`` at check-out and a ``ROLLBACK`` at check-in even
after a commit. On the answer path (about forty statements in a dozen transactions) those
trips were most of the event loop's database cost.

This adaptation keeps aiosqlite and its thread (nothing blocks the loop) but:

- runs a whole statement (cursor, execute, fetch every row, close) as **one** call on the
  connection's thread (:class:`OneTripCursor`), ``BEGIN`` included;
- skips the check-in ``ROLLBACK`` when SQLite says no transaction is open
  (``sqlite3.Connection.in_transaction``, which ``sqlite3`` itself checks before rolling back,
  so the outcome is the same, minus the trip);
- replaces the pre-ping with a local liveness check (:meth:`OneTripConnection.is_alive`): a
  connection whose thread was stopped underneath the pool (aiosqlite's terminate path) is
  refused at check-out and the pool opens a new one — what the ping was there for.

Selected by :func:`backend.db.engine.create_engine` for every SQLite URL, through
SQLAlchemy's ``module=`` (the dialect stays ``sqlite+aiosqlite``).
"""

from __future__ import annotations

import collections
import sqlite3
from collections.abc import Sequence
from typing import Any

import aiosqlite
from sqlalchemy import event
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import PoolResetState
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

#: What one statement's trip brings back: description, rows, rowcount, lastrowid.
_Outcome = tuple[Any, list[Any], int, int | None]


def _run_statement(driver: aiosqlite.Connection, operation: str, parameters: Any) -> _Outcome:
    """On the connection's thread: the whole statement, every row fetched."""
    cursor = driver._conn.cursor()
    try:
        cursor.execute(operation, () if parameters is None else parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


def _run_many(driver: aiosqlite.Connection, operation: str, rows: Sequence[Any]) -> _Outcome:
    cursor = driver._conn.cursor()
    try:
        cursor.executemany(operation, rows)
        return cursor.description, [], cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


class OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A buffered cursor whose statement is one call on the connection's thread.

    It holds nothing on that thread between calls: the rows come back with the statement, so
    closing it needs no trip either.
    """

    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: OneTripConnection) -> None:
        # No call to the base: it would open an aiosqlite cursor (one trip).
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> int:
        return self._lastrowid  # type: ignore[return-value]

    async def _async_soft_close(self) -> None:
        """Nothing is open on the thread: the description stays readable."""

    def close(self) -> None:
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        self._store(self._trip(_run_statement, operation, parameters))

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        self._store(self._trip(_run_many, operation, seq_of_parameters))

    def _trip(self, work: Any, operation: Any, parameters: Any) -> _Outcome:
        try:
            return await_(self._connection._execute(work, self._connection, operation, parameters))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def _store(self, outcome: _Outcome) -> None:
        self._description, rows, self._rowcount, self._lastrowid = outcome
        self._rows = collections.deque(rows)


class OneTripConnection(AsyncAdapt_aiosqlite_connection):
    """aiosqlite's adapted connection with :class:`OneTripCursor` and a trip-free reset."""

    __slots__ = ()

    _cursor_cls = OneTripCursor

    def is_alive(self) -> bool:
        """The connection's thread runs and its SQLite connection is open (no trip)."""
        driver = self._connection
        return driver._running and driver._connection is not None and driver._thread.is_alive()

    def in_transaction(self) -> bool:
        """Whether SQLite holds a transaction open on this connection (read without a trip:
        the flag is the library's autocommit state, and no statement runs on a connection
        the pool is checking in)."""
        return self.is_alive() and bool(self._connection._conn.in_transaction)

    def rollback(self) -> None:
        if self.in_transaction():
            super().rollback()


class OneTripDbapi(AsyncAdapt_aiosqlite_dbapi):
    """The DBAPI module SQLAlchemy's aiosqlite dialect is given (``module=``)."""

    def __init__(self) -> None:
        super().__init__(aiosqlite, sqlite3)

    def connect(self, *arg: Any, **kw: Any) -> OneTripConnection:
        stock = super().connect(*arg, **kw)
        return OneTripConnection(self, stock._connection)


def install_pool_hooks(sync_engine: Any) -> None:
    """Check-out refuses a dead connection (the pool replaces it); check-in rolls back only
    an open transaction. Use with ``pool_pre_ping=False, pool_reset_on_return=None``."""

    @event.listens_for(sync_engine, "checkout")
    def _refuse_dead(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if not dbapi_connection.is_alive():
            raise DisconnectionError("the SQLite connection's thread has stopped")

    @event.listens_for(sync_engine, "reset")
    def _reset(dbapi_connection: Any, _record: Any, state: PoolResetState) -> None:
        # The pool's own reset is off (``pool_reset_on_return=None``); as it would, roll back
        # only where the event loop is usable, and only what is open.
        if state.asyncio_safe and not state.transaction_was_reset:
            dbapi_connection.rollback()
