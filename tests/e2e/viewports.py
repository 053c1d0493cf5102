"""The browser the e2e tests and ``benchmarks/activation.py`` drive: the system Chromium with
its launch flags, and the context options of the two layouts (``browser.new_context(**X)``): a
desktop (1280x800) and a phone (390x844, touch, 2x)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Debian's Chromium: Playwright's own browser download needs the open internet.
CHROMIUM = Path("/usr/bin/chromium")
#: Without the networking flags Chromium floods a closed network with refused connections.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
