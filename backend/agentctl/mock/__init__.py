"""The mock agent: a separate process speaking the agentctl protocol, driven by prompt scripts.

Run it with ``python -m backend.agentctl.mock --port 8765 --state-dir DIR``. Modules:
``script`` (prompt text -> steps), ``record`` (durable prompt record), ``runner`` (executes
steps and calls the backend back), ``failpoints`` and ``connection`` (injected faults),
``app`` (the HTTP API).
"""

from __future__ import annotations

from backend.agentctl.mock.app import create_mock_app

__all__ = ["create_mock_app"]
