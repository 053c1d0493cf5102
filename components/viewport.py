"""The layout class as a client fact: a ``matchMedia`` listener that reports it to the state.

``layout_listener()`` renders nothing. On mount it tells ``AppState.set_layout_class`` whether
the window is a ``phone`` (< 48em = 768px), a ``tablet`` (48em-62em) or a ``desktop`` (>= 62em,
Reflex's ``md``), and again whenever a breakpoint is crossed (``change`` events of the two
media queries; no resize flood). The queries are exactly the ones ``rx.breakpoints`` compiles
to, so the CSS-driven chrome and the mounted task sheet switch together.
"""

from __future__ import annotations

from typing import Any, cast

import reflex as rx
from reflex_base.components.memoize_helpers import get_memoized_event_triggers
from reflex_base.vars.base import Var

from state.app_state import AppState
from state.layout import DESKTOP, DESKTOP_QUERY, PHONE, TABLET, TABLET_QUERY


class LayoutClassListener(rx.Fragment):
    """Calls ``on_change(layout_class)`` on mount and when the layout class changes."""

    on_change: rx.EventHandler[rx.event.passthrough_event_spec(str)]

    @classmethod
    def create(cls, *children: Any, **props: Any) -> LayoutClassListener:
        # As Reflex's own window_event_listener: a stable (memoized) callback for the hook.
        component = cast("LayoutClassListener", super().create(*children, **props))
        memoized = get_memoized_event_triggers(component)
        if memoized:
            component.event_triggers = {**component.event_triggers, **memoized}
        return component

    def _exclude_props(self) -> list[str]:
        return [*super()._exclude_props(), *self.event_triggers.keys()]

    def add_hooks(self) -> list[str | Var[Any]]:
        trigger = self.event_triggers.get("on_change")
        if trigger is None:
            return []
        return [
            Var(
                f"""
useEffect(() => {{
    if (typeof window === 'undefined' || !window.matchMedia) return;
    const report = {Var.create(trigger)};
    const tablet = window.matchMedia('{TABLET_QUERY}');
    const desktop = window.matchMedia('{DESKTOP_QUERY}');
    const current = () => desktop.matches ? '{DESKTOP}' : tablet.matches ? '{TABLET}' : '{PHONE}';
    const changed = () => report(current());
    changed();
    tablet.addEventListener('change', changed);
    desktop.addEventListener('change', changed);
    return () => {{
        tablet.removeEventListener('change', changed);
        desktop.removeEventListener('change', changed);
    }};
}}, []);
"""
            )
        ]


def layout_listener() -> rx.Component:
    """Keeps ``AppState.layout_class`` in step with the window."""
    return LayoutClassListener.create(on_change=AppState.set_layout_class)
