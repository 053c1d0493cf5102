"""Garbage-collector settings for a serving process (``backend.serve`` and the Reflex app).

Why: the cyclic collector's older-generation passes walk every object alive, and a started
backend holds hundreds of thousands made once at start-up (SQLAlchemy's tables and compiled
statements, FastAPI's routes, the MCP SDK, Reflex). The respond benchmark measured the
collector at 7-20 ms of event-loop time per answer. Freezing the start-up heap moves those
objects to the permanent generation, so passes only walk what requests create; and young
collections run less often, since a request's garbage is mostly freed by reference counting.
Only processes that serve call this: a test process building many runtimes would keep their
cyclic garbage forever.
"""

from __future__ import annotations

import gc

#: Allocations between young collections (CPython's default is 700).
YOUNG_THRESHOLD = 10_000


def settle_for_serving() -> None:
    """Collect once, freeze what survives, and collect young objects less often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
