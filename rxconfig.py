"""Reflex configuration.

The app owns no ``rx.Model`` tables (the backend owns the database, see ``backend.config``), so
no ``db_url`` here. Everything that would reach the network at start-up is switched off: the
machines Kandev runs on may only reach package registries. A backend worker that dies is
replaced instead of stopping the app (``kandev_app/supervision.py``).
"""

import reflex as rx

from kandev_app.supervision import respawn_failed_workers

respawn_failed_workers()

config = rx.Config(
    app_name="kandev_app",
    telemetry_enabled=False,
    show_built_with_reflex=False,
    # Reflex 0.10 deprecates App(theme=...): the Radix theme is configured here.
    plugins=[
        rx.plugins.RadixThemesPlugin(
            theme=rx.theme(accent_color="indigo", gray_color="slate", radius="large")
        ),
    ],
    # The sitemap plugin is on by default (with a start-up warning); a local tool needs no sitemap.
    disable_plugins=[rx.plugins.SitemapPlugin],
)
