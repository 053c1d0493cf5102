"""``python -m backend.agentctl.mock``: serve the mock agent on 127.0.0.1 with uvicorn.

Flags win over the environment (``KANDEV_MOCK_AGENT_PORT``, ``KANDEV_MOCK_AGENT_STATE_DIR``);
the state dir defaults to ``.data/mock-agent`` next to the SQLite file. A bad setting exits
with status 2 and a one-line message, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import uvicorn

from backend.agentctl.mock.app import create_mock_app
from backend.config import PROJECT_ROOT

DEFAULT_PORT = 8765
DEFAULT_STATE_DIR = PROJECT_ROOT / ".data" / "mock-agent"
#: Held ``timeout`` requests and long callbacks must not stall shutdown forever.
GRACEFUL_SHUTDOWN_S = 2


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m backend.agentctl.mock")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    if args.port is None:
        try:
            args.port = int(os.environ.get("KANDEV_MOCK_AGENT_PORT", DEFAULT_PORT))
        except ValueError:
            parser.error("KANDEV_MOCK_AGENT_PORT must be an integer")
    if args.state_dir is None:
        args.state_dir = Path(os.environ.get("KANDEV_MOCK_AGENT_STATE_DIR", DEFAULT_STATE_DIR))
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        args.state_dir.mkdir(parents=True, exist_ok=True)
        app = create_mock_app(args.state_dir)
    except (OSError, ValueError) as exc:
        print(f"mock agent: {exc}", file=sys.stderr)
        return 2
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=args.port,
        http="h11",  # DropConnection reaches the transport through h11's request cycle
        log_level=args.log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    uvicorn.Server(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
