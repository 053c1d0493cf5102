"""What the model test reads from the database, and the invariant failures it raises.

Each invariant has its own exception type so Hypothesis reports (and shrinks) distinct broken
invariants as distinct failures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.authority import BundleFacts, bundle_facts, current_turn_ids, session_pending_actions
from backend.db.engine import read_tx
from backend.db.tables import messages, sessions, tasks, turns, workflow_steps
from backend.request_evidence import DELIVERY_INTENT
from backend.vocabulary import MessageType, PendingAction


class Violation(AssertionError):
    invariant = "?"

    def __init__(self, detail: str) -> None:
        super().__init__(f"[{self.invariant}] {detail}")


class I1StuckClaim(Violation):
    invariant = "1 no delivery_claimed bundle without a respond in flight"


class I2Dispatch(Violation):
    invariant = "2 answer dispatched at most once / exactly once when reported delivered"


class I3Workflow(Violation):
    invariant = "3 task stays in its step while its bundle is (or can again be) active"


class I4Busy(Violation):
    invariant = "4 no session stuck RUNNING without a turn able to finish it"


class I5Revision(Violation):
    invariant = "5 pending-action revision never goes backward / events converge"


class I6Respond(Violation):
    invariant = "6 respond status agrees with the model and the contract"


class I7AgentView(Violation):
    invariant = "7 what the agent was told agrees with the durable rows"


class I8StaleReady(Violation):
    invariant = "8 a stale ready event changes nothing"


class I9Callback(Violation):
    invariant = "9 callbacks of the current turn are accepted"


class Unexpected(Violation):
    invariant = "0 unexpected error / liveness"


@dataclass
class Snapshot:
    session: Any
    task_step: str
    task_moved_at: datetime
    turns: list[Any]
    current_turn: str | None
    rows: list[Any]
    facts: dict[str, BundleFacts]
    pending_action: PendingAction | None

    def rows_of(self, pending_id: str) -> list[Any]:
        return [r for r in self.rows if r.metadata.get("pending_id") == pending_id]

    def intent_rows(self) -> list[Any]:
        return [r for r in self.rows if r.metadata.get(DELIVERY_INTENT) is not None]

    def unpublished(self) -> list[Any]:
        return [t for t in self.turns if _truthy(t.metadata.get("prompt_dispatch_pending"))]

    def reserved_claims(self) -> set[str]:
        """Message ids whose claim an unpublished reservation still carries. Outside an
        in-flight respond that only happens after a failed rollback (S29): the reservation
        then owns the claim — and keeps the session busy — until start-up recovery."""
        owned: set[str] = set()
        for turn in self.unpublished():
            ids = turn.metadata.get("prompt_dispatch_message_ids")
            if isinstance(ids, list):
                owned.update(i for i in ids if isinstance(i, str))
        return owned

    def turn(self, turn_id: str) -> Any:
        return next((t for t in self.turns if t.id == turn_id), None)


def _truthy(value: Any) -> bool:
    return value in (True, 1, "true", "1")


async def snapshot(engine: AsyncEngine, session_id: str, task_id: str) -> Snapshot:
    async with read_tx(engine) as conn:
        session = (await conn.execute(select(sessions).where(sessions.c.id == session_id))).one()
        task = (
            await conn.execute(
                select(tasks.c.updated_at, workflow_steps.c.name)
                .join(workflow_steps, workflow_steps.c.id == tasks.c.workflow_step_id)
                .where(tasks.c.id == task_id)
            )
        ).one()
        turn_rows = list(
            await conn.execute(
                select(turns).where(turns.c.session_id == session_id).order_by(turns.c.started_at)
            )
        )
        rows = list(
            await conn.execute(
                select(messages)
                .where(
                    messages.c.session_id == session_id,
                    messages.c.type == MessageType.CLARIFICATION_REQUEST.value,
                )
                .order_by(messages.c.created_at, messages.c.id)
            )
        )
        facts: dict[str, BundleFacts] = {}
        for pid in {r.metadata.get("pending_id") for r in rows}:
            found = await bundle_facts(conn, pid)
            if found is not None:
                facts[pid] = found
        current = (await current_turn_ids(conn, [session_id]))[session_id]
        actions = await session_pending_actions(conn, sessions.c.id == session_id)
    return Snapshot(
        session=session,
        task_step=task.name,
        task_moved_at=task.updated_at,
        turns=turn_rows,
        current_turn=current,
        rows=rows,
        facts=facts,
        pending_action=actions.get(session_id),
    )
