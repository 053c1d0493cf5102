"""The one repository rule: which turn is current and which request bundles are operational.

Every consumer (projections, the chat overlay, the workflow guard, detach and expiry passes,
respond, the watchdog and start-up recovery) asks this package; nobody else interprets
``metadata.status`` or the reservation flags. See ``docs/architecture.md``.
"""

from backend.authority.bundles import BundleFacts, BundleState, LiveWaiters, classify_bundle
from backend.authority.repository import (
    SessionAuthority,
    active_bundles,
    bundle_facts,
    current_turn_ids,
    session_authority,
    session_pending_actions,
    task_pending_actions,
    visible_turns,
)
from backend.authority.scope import Scope, Where, as_clause

__all__ = [
    "BundleFacts",
    "BundleState",
    "LiveWaiters",
    "Scope",
    "SessionAuthority",
    "Where",
    "active_bundles",
    "as_clause",
    "bundle_facts",
    "classify_bundle",
    "current_turn_ids",
    "session_authority",
    "session_pending_actions",
    "task_pending_actions",
    "visible_turns",
]
