"""The overlay: the open session's active bundle. A clarification shows one question at a
time, with Submit and Skip; an agent's permission request (``kind`` ``permission``) shows its
title and one button per option, and a click sends that choice. It shows exactly the bundle the
server lists as active for the open view; a refusal (409, S15) closes it and re-reads, a
retryable error keeps the user's answer.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any

import reflex as rx

from state import gateway
from state.session_view import SessionViewState, ViewRef
from state.ui_models import (
    QuestionItem,
    answers_payload,
    choose_option,
    first_unanswered,
    merge_task,
    question_items,
    set_answer_text,
)

log = logging.getLogger(__name__)

#: The bundle ``kind`` of an agent's permission request.
PERMISSION_KIND = "permission"


class OverlayState(SessionViewState):
    questions: list[QuestionItem] = []  # noqa: RUF012 - how Reflex declares state vars
    bundle_pending_id: str = ""
    #: ``clarification`` or ``permission`` (the bundle's ``kind``).
    bundle_kind: str = ""
    #: The permission option being sent (while ``overlay_busy`` is ``permit``).
    permit_choice: str = ""
    question_index: int = 0
    overlay_busy: str = ""
    overlay_error: str = ""

    @rx.var
    def has_bundle(self) -> bool:
        return len(self.questions) > 0

    @rx.var
    def is_permission(self) -> bool:
        return len(self.questions) > 0 and self.bundle_kind == PERMISSION_KIND

    @rx.var
    def question_count(self) -> int:
        return len(self.questions)

    @rx.var
    def current_question(self) -> QuestionItem:
        if 0 <= self.question_index < len(self.questions):
            return self.questions[self.question_index]
        return QuestionItem(message_id="", question="")

    @rx.var
    def can_submit(self) -> bool:
        return bool(self.questions) and first_unanswered(self.questions) is None

    # -- helpers (not event handlers) ---------------------------------------------------------

    def show_bundles(self) -> None:
        """Show the first held bundle; the user's answers survive only while it stays the same
        bundle."""
        bundle = self._bundles[0] if self._bundles else None
        pending_id = bundle["pending_id"] if bundle else ""
        previous = self.questions if pending_id == self.bundle_pending_id else []
        if pending_id != self.bundle_pending_id:
            self.question_index = 0
            self.overlay_error = ""
            self.overlay_busy = ""
        self.questions = question_items(bundle, previous)
        self.bundle_pending_id = pending_id
        self.bundle_kind = str(bundle.get("kind") or "clarification") if bundle else ""
        if self.question_index >= len(self.questions):
            self.question_index = max(0, len(self.questions) - 1)

    def close(self) -> None:
        self.questions = []
        self.bundle_pending_id = ""
        self.bundle_kind = ""
        self.question_index = 0
        self.overlay_error = ""
        self.overlay_busy = ""

    # -- event handlers -----------------------------------------------------------------------

    @rx.event
    def pick_option(self, message_id: str, option_id: str) -> None:
        self.questions = choose_option(self.questions, message_id, option_id)
        self.overlay_error = ""

    @rx.event
    def set_answer_text(self, message_id: str, text: str) -> None:
        self.questions = set_answer_text(self.questions, message_id, text)
        self.overlay_error = ""

    @rx.event
    def next_question(self) -> None:
        self.question_index = min(self.question_index + 1, max(0, len(self.questions) - 1))

    @rx.event
    def previous_question(self) -> None:
        self.question_index = max(0, self.question_index - 1)

    @rx.event(background=True)
    async def submit_answer(self) -> AsyncIterator[Any]:
        async for event in _respond(self, rejected=False):
            yield event

    @rx.event(background=True)
    async def skip_question(self) -> AsyncIterator[Any]:
        """Skip: reject exactly the visible bundle through ``/respond`` (``rejected: true``)."""
        async for event in _respond(self, rejected=True):
            yield event

    @rx.event(background=True)
    async def choose_permission(self, option_id: str) -> AsyncIterator[Any]:
        """Answer the visible permission request with ``option_id`` (one click, one choice)."""
        async with self:
            if self.overlay_busy or self.bundle_kind != PERMISSION_KIND:
                return  # (no bundle: no kind)
            sent = _sending(self, "permit")
            self.permit_choice = option_id
        async for event in _converge(
            self, sent, gateway.respond_permission(sent.pending_id, option_id)
        ):
            yield event


@dataclass(frozen=True, slots=True)
class _Sent:
    """What the overlay showed when it sent a response (a late result applies only there)."""

    pending_id: str
    view: ViewRef
    task_id: str


def _sending(state: OverlayState, busy: str) -> _Sent:
    """Mark the overlay busy sending a response to the visible bundle (inside the lock)."""
    state.overlay_busy = busy
    state.overlay_error = ""
    state.chat_notice = ""
    return _Sent(state.bundle_pending_id, state.view_ref(), state.active_task_id)


async def _respond(state: OverlayState, *, rejected: bool) -> AsyncIterator[Any]:
    """Submit (answers) or Skip (``rejected``) the visible bundle, then converge."""
    async with state:
        if state.overlay_busy or not state.bundle_pending_id:
            return
        if not rejected:
            missing = first_unanswered(state.questions)
            if missing is not None:
                state.question_index = missing
                state.overlay_error = "Answer every question before submitting."
                return
        answers = None if rejected else answers_payload(state.questions)
        sent = _sending(state, "skip" if rejected else "submit")
    async for event in _converge(
        state, sent, gateway.respond(sent.pending_id, answers, rejected, None)
    ):
        yield event


async def _converge(state: OverlayState, sent: _Sent, call: Awaitable[str]) -> AsyncIterator[Any]:
    """Await the response, then re-read the view and apply it.

    409 (superseded or terminal, S15): the overlay closes and the view is re-read; a retryable
    500 keeps the overlay open with the same answer; a non-retryable one closes it.
    """
    pending_id, view, task_id = sent.pending_id, sent.view, sent.task_id
    error = None
    try:
        await call
    except Exception as exc:
        error = gateway.describe(exc)
    try:
        messages, bundles = await gateway.session_view(view.session_id)
        tasks = await gateway.tasks_by_id([task_id]) if task_id else {}
    except Exception as exc:
        log.warning("refresh after respond failed: %r", exc)
        messages, bundles, tasks = None, None, {}
    async with state:
        state.overlay_busy = ""
        state.permit_choice = ""
        if task_id in tasks:
            state.store_tasks({task_id: merge_task(state._tasks.get(task_id), tasks[task_id])})
        if not state.shows(view):
            return
        keep_open = error is not None and (error.retryable or error.status == 400)
        if keep_open:
            state.overlay_error = error.message
        else:
            # Delivered, skipped, or refused as no longer active: this bundle is done here.
            state._bundles = [b for b in state._bundles if b["pending_id"] != pending_id]
            if error is not None:
                state.chat_notice = error.message
        # The server's word, unless live events already brought something newer.
        state.apply_view_reads(view, messages, bundles)
        state.show_bundles()
    yield
