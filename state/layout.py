"""The layout class of a browser tab — ``phone``, ``tablet`` or ``desktop`` — as plain data.

The browser decides the class with ``window.matchMedia`` on the same queries the CSS
breakpoints use (``components/viewport.py``) and reports it to ``AppState.layout_class`` on
mount and on every change. The class decides which task sheet is *mounted* (not merely shown):
a phone sheet below Reflex's ``sm`` breakpoint, a tablet sheet between ``sm`` and ``md``, none
on a desktop (the sidebar is the picker). So a layout change really unmounts one sheet instance
and mounts another, each with its own selection generation (S13).
"""

from __future__ import annotations

from typing import Final

PHONE: Final = "phone"
TABLET: Final = "tablet"
DESKTOP: Final = "desktop"
LAYOUT_CLASSES: Final = (PHONE, TABLET, DESKTOP)

#: Reflex's ``sm`` and ``md`` breakpoints (``reflex_base.breakpoints``), in em as CSS uses them.
TABLET_MIN_EM: Final = 48
DESKTOP_MIN_EM: Final = 62
#: Media queries identical to the ones ``rx.breakpoints(sm=..., md=...)`` compiles to, so the
#: reported class and the CSS-driven chrome switch at exactly the same width.
TABLET_QUERY: Final = f"(min-width: {TABLET_MIN_EM}em)"
DESKTOP_QUERY: Final = f"(min-width: {DESKTOP_MIN_EM}em)"

#: Which task sheet variant a layout class mounts (none on a desktop).
SHEET_FOR_LAYOUT: Final = {PHONE: "phone", TABLET: "tablet"}


def layout_for_width(width_px: float, root_font_px: float = 16.0) -> str:
    """The class for a viewport ``width_px`` wide (media-query ``em`` = the initial font size)."""
    if width_px >= DESKTOP_MIN_EM * root_font_px:
        return DESKTOP
    if width_px >= TABLET_MIN_EM * root_font_px:
        return TABLET
    return PHONE


def coerce_layout(value: object) -> str | None:
    """A reported class, or ``None`` for anything the browser should never send."""
    return value if isinstance(value, str) and value in LAYOUT_CLASSES else None


def sheet_variant(layout: str) -> str | None:
    """The task sheet a layout class mounts: ``phone``, ``tablet`` or ``None``."""
    return SHEET_FOR_LAYOUT.get(layout)
