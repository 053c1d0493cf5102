"""Browser context options of the two layouts the e2e tests drive (``browser.new_context(**X)``):
a desktop (1280x800) and a phone (390x844, touch, 2x)."""

from __future__ import annotations

from typing import Any

DESKTOP: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}}
PHONE: dict[str, Any] = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 2,
    "is_mobile": True,
    "has_touch": True,
}
