"""Operator commands: ``python -m backend.cli migrate|seed``."""

from __future__ import annotations

import argparse
import asyncio
import sys

from backend.config import get_settings
from backend.db.engine import create_engine
from backend.db.migrate import upgrade
from backend.seed import seed_demo


async def _seed(url: str) -> bool:
    engine = create_engine(url)
    try:
        return await seed_demo(engine)
    finally:
        await engine.dispose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backend.cli")
    parser.add_argument("command", choices=["migrate", "seed"])
    args = parser.parse_args(argv)
    url = get_settings().database_url
    if args.command == "migrate":
        upgrade(url)
        print("database migrated", file=sys.stderr)
    else:
        inserted = asyncio.run(_seed(url))
        print("demo data seeded" if inserted else "demo data already present", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
