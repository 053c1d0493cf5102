"""Workflow steps of tasks: creating tasks, moving them between steps, and the workflow guard.

The guard (:mod:`backend.workflow.guard`) is the one place that decides whether a task may
leave its step; it asks :mod:`backend.authority` (the one repository rule) and never derives
"is there a pending question" itself. :mod:`backend.workflow.moves` holds the transactions the
service layer (:mod:`backend.services.tasks`) and the orchestrator's on-turn-complete
transition run.
"""

from backend.workflow.guard import (
    GUARD_FAILPOINT,
    ClarificationPending,
    GuardUnavailable,
    assert_can_leave_step,
    lock_task_for_move,
)
from backend.workflow.moves import (
    InvalidStep,
    MoveResult,
    advance_on_turn_complete,
    insert_task_row,
    move_task_to_step,
    state_for_step,
)

__all__ = [
    "GUARD_FAILPOINT",
    "ClarificationPending",
    "GuardUnavailable",
    "InvalidStep",
    "MoveResult",
    "advance_on_turn_complete",
    "assert_can_leave_step",
    "insert_task_row",
    "lock_task_for_move",
    "move_task_to_step",
    "state_for_step",
]
