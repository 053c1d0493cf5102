"""Kandev's UI components (Reflex); state lives in :mod:`state`."""
