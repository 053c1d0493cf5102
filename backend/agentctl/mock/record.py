"""The mock agent's durable record of accepted prompts: ``prompts.jsonl`` in its state dir.

Tests count dispatches across crashes of both processes, so a prompt is acknowledged (202)
only after its line is flushed and fsynced. File I/O runs in a worker thread
(``asyncio.to_thread``) so the event loop never blocks; a lock keeps lines whole and in order.

A kill -9 in the middle of a write can leave a torn last line: reads skip lines that are not
valid JSON, and the first append after a restart starts on a fresh line so it cannot be glued
to the torn one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

RECORD_FILE = "prompts.jsonl"
#: The fields ``GET /v1/prompts`` exposes (the protocol's shape); the file keeps more.
PUBLIC_FIELDS = ("session_id", "turn_id", "content", "accepted_at")


class PromptRecord:
    """Append-only JSON-lines file of every accepted prompt, durable before acknowledgement."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / RECORD_FILE
        self._lock = asyncio.Lock()
        self._checked_tail = False

    async def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        async with self._lock:
            await asyncio.to_thread(self._append_sync, line.encode())

    async def entries(self) -> list[dict[str, Any]]:
        async with self._lock:
            return await asyncio.to_thread(self._read_sync)

    def _append_sync(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            if not self._checked_tail:
                data = self._repair_prefix(fd) + data
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._checked_tail = True
        if created:
            _fsync_dir(self.path.parent)

    def _repair_prefix(self, fd: int) -> bytes:
        """A newline when the file ends in a torn line, so the next entry starts clean."""
        size = os.fstat(fd).st_size
        if size == 0:
            return b""
        return b"" if os.pread(fd, 1, size - 1) == b"\n" else b"\n"

    def _read_sync(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        entries = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                logger.warning("skipping torn line %d of %s", number, self.path)
                continue
            if isinstance(entry, dict):
                entries.append(entry)
        return entries


def public_view(entry: dict[str, Any]) -> dict[str, Any]:
    return {field: entry.get(field) for field in PUBLIC_FIELDS}


def _fsync_dir(path: Path) -> None:
    """Make the new file's directory entry durable too (POSIX; a no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
