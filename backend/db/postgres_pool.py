"""A trip-free liveness check for pooled PostgreSQL connections.

SQLAlchemy's ``pool_pre_ping`` sends ``SELECT 1`` at every check-out: on the answer path (a
dozen transactions per answer) that was a dozen extra round trips, each costing the event
loop about a tenth of a millisecond and the server a statement. What the ping is for — a
pooled connection the server has since closed (restart, ``pg_terminate_backend``, idle
timeout) — shows without a round trip: an idle connection has nothing to read, so a socket
that is readable (the server's goodbye, or its EOF) or a connection psycopg already marked
broken is refused, and the pool opens a new one. A false alarm (a notice on an idle
connection) only costs one reconnect.
"""

from __future__ import annotations

import select
from typing import Any

from psycopg import AsyncConnection, pq
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError


def looks_alive(connection: AsyncConnection[Any]) -> bool:
    """Open, idle, not broken, and nothing arrived from the server meanwhile."""
    if connection.closed or connection.broken:
        return False
    pgconn = connection.pgconn
    if pgconn.status != pq.ConnStatus.OK:
        return False
    if pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False  # a pooled connection is idle; anything else is not safe to hand out
    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN | select.POLLERR | select.POLLHUP)
    return not poller.poll(0)


def install_pool_hooks(sync_engine: Any) -> None:
    """Refuse, at check-out, a pooled connection that does not look alive (the pool then
    replaces it). Use with ``pool_pre_ping=False``."""

    @event.listens_for(sync_engine, "checkout")
    def _refuse_dead(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if not looks_alive(dbapi_connection.driver_connection):
            raise DisconnectionError("the pooled PostgreSQL connection was closed")
