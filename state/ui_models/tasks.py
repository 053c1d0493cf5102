"""Task rows, step groups and board columns built from the boot workflows, and the merging of
task reads and live summaries: a held status summary is only ever replaced by a newer one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from state.ui_models.labels import (
    PENDING_HINTS,
    TASK_STATE_COLORS,
    as_text,
    pending_of_task,
    state_label,
    summary_revision,
)


@dataclass
class StepItem:
    id: str
    name: str
    position: int


@dataclass
class WorkspaceItem:
    id: str
    name: str


def workspace_items(boot: Mapping[str, Any]) -> list[WorkspaceItem]:
    """The caller's workspaces by name (where a new task may go)."""
    items = [WorkspaceItem(w["id"], as_text(w.get("name"))) for w in boot.get("workspaces", [])]
    return sorted(items, key=lambda w: (w.name.casefold(), w.id))


@dataclass
class WorkflowItem:
    id: str
    workspace_id: str
    workspace_name: str
    name: str
    steps: list[StepItem] = field(default_factory=list)


@dataclass
class TaskRow:
    """One task as the sidebar, the phone sheet and the board show it."""

    id: str = ""
    title: str = ""
    workspace_id: str = ""
    workspace_name: str = ""
    workflow_id: str = ""
    step_id: str = ""
    step_name: str = ""
    step_position: int = 0
    state: str = ""
    state_label: str = ""
    state_color: str = "gray"
    pending_action: str = ""
    pending_hint: str = ""


@dataclass
class StepGroup:
    """Sidebar section: tasks of every workspace that sit in a step of this name."""

    name: str
    position: int
    tasks: list[TaskRow] = field(default_factory=list)


@dataclass
class BoardColumn:
    id: str
    name: str
    tasks: list[TaskRow] = field(default_factory=list)
    #: Steps a card of this column may move to (every other step of the workflow).
    targets: list[StepItem] = field(default_factory=list)


def workflow_items(boot: Mapping[str, Any]) -> list[WorkflowItem]:
    """The boot payload's workflows with their steps (by position) and workspace names."""
    names = {w["id"]: as_text(w.get("name")) for w in boot.get("workspaces", [])}
    items = []
    for wf in boot.get("workflows", []):
        steps = sorted(
            (
                StepItem(s["id"], as_text(s.get("name")), int(s.get("position", 0)))
                for s in wf.get("steps", [])
            ),
            key=lambda s: (s.position, s.id),
        )
        items.append(
            WorkflowItem(
                id=wf["id"],
                workspace_id=wf["workspace_id"],
                workspace_name=names.get(wf["workspace_id"], ""),
                name=as_text(wf.get("name")),
                steps=steps,
            )
        )
    items.sort(key=lambda w: (w.workspace_name.casefold(), w.name.casefold(), w.id))
    return items


def task_row(task: Mapping[str, Any], workflows: Sequence[WorkflowItem]) -> TaskRow:
    """A Task payload as a row; the step name and workspace come from the boot workflows."""
    step_id = as_text(task.get("workflow_step_id"))
    workflow = next((w for w in workflows if w.id == task.get("workflow_id")), None)
    step = next((s for s in workflow.steps if s.id == step_id), None) if workflow else None
    state = as_text(task.get("state"))
    pending = pending_of_task(task)
    return TaskRow(
        id=task["id"],
        title=as_text(task.get("title")),
        workspace_id=as_text(task.get("workspace_id")),
        workspace_name=workflow.workspace_name if workflow else "",
        workflow_id=as_text(task.get("workflow_id")),
        step_id=step_id,
        step_name=step.name if step else "",
        step_position=step.position if step else 0,
        state=state,
        state_label=state_label(state),
        state_color=TASK_STATE_COLORS.get(state.upper(), "gray"),
        pending_action=pending,
        pending_hint=PENDING_HINTS.get(pending, "The agent waits for your answer")
        if pending
        else "",
    )


def task_rows(
    tasks: Iterable[Mapping[str, Any]], workflows: Sequence[WorkflowItem]
) -> list[TaskRow]:
    return [task_row(t, workflows) for t in tasks]


def step_groups(rows: Iterable[TaskRow]) -> list[StepGroup]:
    """Rows grouped by step name in workflow order (the default workflow's steps share names
    across workspaces, so "In Progress" is one section); empty steps are left out."""
    groups: dict[str, StepGroup] = {}
    for row in rows:
        key = row.step_name or "Other"
        group = groups.get(key)
        if group is None:
            group = groups[key] = StepGroup(key, row.step_position if row.step_name else 1 << 20)
        group.position = min(group.position, row.step_position if row.step_name else 1 << 20)
        group.tasks.append(row)
    return sorted(groups.values(), key=lambda g: (g.position, g.name))


def board_columns(workflow: WorkflowItem | None, rows: Iterable[TaskRow]) -> list[BoardColumn]:
    """The workflow's steps in order, each with its tasks and the steps a card may move to."""
    if workflow is None:
        return []
    mine = [r for r in rows if r.workflow_id == workflow.id]
    return [
        BoardColumn(
            id=step.id,
            name=step.name,
            tasks=[r for r in mine if r.step_id == step.id],
            targets=[s for s in workflow.steps if s.id != step.id],
        )
        for step in workflow.steps
    ]


def is_board_move(columns: Iterable[BoardColumn], task_id: str, step_id: str) -> bool:
    """Whether a card dropped on a board column asks for a move.

    The drop's ids come from the browser, so they are checked against what the board shows:
    the task is a card on it and the step is another of its columns. A drop on the card's own
    column, or of anything else, is no move at all (the server would refuse a foreign step).
    """
    for column in columns:
        if any(t.id == task_id for t in column.tasks):
            return any(s.id == step_id for s in column.targets)
    return False


def merge_task(
    current: Mapping[str, Any] | None,
    fresh: Mapping[str, Any],
    *,
    revision_at_read: int | None = None,
) -> dict[str, Any]:
    """A task read from the server, merged over what the client holds.

    Summaries only move forward: a fresh summary with a lower revision than the held one is
    replaced by the held one (an older read finishing late). A null summary (the server could
    not repair it) clears the held summary, unless a newer live summary arrived while that read
    was in flight (``revision_at_read`` is the revision held when the read began).
    """
    merged = dict(fresh)
    if current is None:
        return merged
    held = current.get("status_summary")
    held_rev = summary_revision(current)
    fresh_rev = summary_revision(fresh)
    if fresh.get("status_summary") is None:
        if held_rev is not None and held_rev != revision_at_read:
            merged["status_summary"] = held
    elif held_rev is not None and (fresh_rev is None or fresh_rev < held_rev):
        merged["status_summary"] = held
    return merged


def apply_summary(
    current: Mapping[str, Any] | None, summary: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """``task.status_summary.updated``: the task with ``summary`` if it is newer than the held
    one; ``None`` when nothing changes (unknown task, or an older or equal revision)."""
    if current is None or not isinstance(summary, Mapping):
        return None
    revision = summary.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool):
        return None
    held = summary_revision(current)
    if held is not None and revision <= held:
        return None
    return {**current, "status_summary": dict(summary)}


def invalidate_summary(
    current: Mapping[str, Any] | None, stale_revision: Any = None
) -> dict[str, Any] | None:
    """``task.status_summary.invalidated``: drop the held summary (the server could not repair
    it; the next read brings the authoritative value) -- unless the held one is newer than the
    ``stale_revision`` the server gave up on: a live summary that overtook the failed repair
    must not be erased by it. ``None`` when nothing changes."""
    if current is None or current.get("status_summary") is None:
        return None
    held = summary_revision(current)
    known_stale = isinstance(stale_revision, int) and not isinstance(stale_revision, bool)
    if held is not None and known_stale and held > stale_revision:
        return None
    return {**current, "status_summary": None}
