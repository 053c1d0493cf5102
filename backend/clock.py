"""The one place that reads wall-clock time, so every stored timestamp is aware UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)
