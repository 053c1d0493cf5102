"""Derived views clients read: pending-action projections and their revisions."""
