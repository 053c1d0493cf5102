"""The board: one workflow's steps as columns of task cards. A move goes through the server's
workflow guard; a refusal (an open agent question) is shown and the card stays where the
server keeps it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import reflex as rx

from state import gateway
from state.app_state import AppState
from state.ui_models import BoardColumn, WorkflowItem, board_columns, is_board_move, merge_task

log = logging.getLogger(__name__)


class BoardState(AppState):
    board_workflow_id: str = ""
    board_notice: str = ""

    @rx.var
    def workflows(self) -> list[WorkflowItem]:
        return self._workflow_items

    @rx.var
    def board_columns(self) -> list[BoardColumn]:
        wf = next((w for w in self._workflow_items if w.id == self.board_workflow_id), None)
        return board_columns(wf, self.rows)

    @rx.var
    def board_workflow_name(self) -> str:
        wf = next((w for w in self._workflow_items if w.id == self.board_workflow_id), None)
        return f"{wf.workspace_name} · {wf.name}" if wf else ""

    def keep_board_choice(self) -> None:
        """After the workflows were (re)loaded: keep the chosen board if it still exists."""
        ids = [w.id for w in self._workflow_items]
        if self.board_workflow_id not in ids:
            self.board_workflow_id = ids[0] if ids else ""

    @rx.event
    def choose_board(self, workflow_id: str) -> None:
        self.board_workflow_id = workflow_id
        self.board_notice = ""

    @rx.event(background=True)
    async def move_task(self, task_id: str, step_id: str) -> AsyncIterator[Any]:
        """A card's "Move to" menu (every viewport, and the keyboard's way to move)."""
        async for event in _move(self, task_id, step_id):
            yield event

    @rx.event(background=True)
    async def drop_card(self, step_id: str, task_id: str) -> AsyncIterator[Any]:
        """A card dragged onto a board column (``components/drag.py``): the menu's move.

        Both ids come from the browser's drop event, so only a card of this board dropped on
        another of its columns becomes a move request.
        """
        async with self:
            if not is_board_move(self.board_columns, task_id, step_id):
                return
        async for event in _move(self, task_id, step_id):
            yield event


async def _move(state: BoardState, task_id: str, step_id: str) -> AsyncIterator[Any]:
    """Move a card to another step through the workflow guard, then show where it is.

    A refusal (a task with an open agent question cannot leave its step, or any other error)
    is shown above the board, and the card is re-read so it stays where the server keeps it.
    """
    async with state:
        state.board_notice = ""
        title = state._tasks.get(task_id, {}).get("title", "The task")
    notice = ""
    moved: dict[str, Any] | None = None
    try:
        moved = await gateway.move_task(task_id, step_id)
    except Exception as exc:
        error = gateway.describe(exc)
        if error.code == "clarification_pending":
            notice = f"“{title}” has an open agent question. Answer it before moving the task."
        else:
            notice = error.message
        try:
            moved = (await gateway.tasks_by_id([task_id])).get(task_id)
        except Exception as reread:
            log.warning("re-reading task %s after a refused move failed: %r", task_id, reread)
    async with state:
        state.board_notice = notice
        if moved is not None:
            state.store_tasks({task_id: merge_task(state._tasks.get(task_id), moved)})
    yield
