"""Permission-request use cases: the user's choice for an agent's permission request."""

from __future__ import annotations

from backend.access import Caller, visible_bundle
from backend.db.engine import read_tx
from backend.runtime import Runtime


async def respond_to_permission(
    runtime: Runtime, caller: Caller, pending_id: str, option_id: str
) -> str:
    """Pick ``option_id`` on a visible request (404 before any work when missing or not the
    caller's to see, exactly like a clarification); returns the outcome. Raises the desk's
    errors: 400 ``validation`` (unknown option), 409 ``not_active`` with the state."""
    async with read_tx(runtime.engine) as conn:
        await visible_bundle(conn, caller, pending_id)
    return await runtime.permissions.respond(pending_id, option_id)
