"""Task activation as a pure state machine: ``begin`` before the session load, ``settle`` after.

The Reflex layer does only I/O around these two calls::

    ticket = flow.begin(summary, surface=sheet_id)       # under the state lock
    for g in ticket.supersedes: cancel_request(g)         # optional: abort superseded loads
    try: result = await load_sessions(task_id, bypass_cache=ticket.force)
    except BaseException as error: result = error         # CancelledError -> aborted
    decision = flow.settle(ticket, result, current_summary_or_None,
                           remembered_session_id=..., active_session_id=...)
    for effect in decision.effects: run(effect)           # under the state lock

Desktop and phone run the same code; a phone ticket (a sheet surface) only adds ``CloseSheet``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from state.activation.generations import GenerationCounter, Selection, SheetSelection, TaskLoads
from state.activation.models import PayloadError, SessionInfo, TaskSummary, sessions_from_json
from state.activation.projections import SessionProjections
from state.activation.selection import Decision, Reason, choose_session, inert, task_route

#: The desktop sidebar's surface id (always mounted).
DESKTOP = "desktop"


@dataclass(frozen=True, slots=True)
class Loaded:
    """A successful task-session list."""

    sessions: tuple[SessionInfo, ...]

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Loaded:
        return cls(sessions_from_json(payload))


@dataclass(frozen=True, slots=True)
class LoadFailed:
    """The load failed for a reason other than being aborted (HTTP error, bad payload)."""

    error: str = ""


@dataclass(frozen=True, slots=True)
class LoadAborted:
    """The load was aborted (the JavaScript ``AbortError``; ``asyncio.CancelledError`` here).
    Never a failure: it does not trigger the task-only fallback (S42)."""


Outcome = Loaded | LoadFailed | LoadAborted

#: Anything ``settle`` accepts as the load's result.
LoadResult = Outcome | Mapping[str, Any] | Sequence[SessionInfo] | BaseException


def as_outcome(result: LoadResult) -> Outcome:
    """Normalise what the load produced: an outcome, a ``{"sessions": [...]}`` payload, parsed
    sessions, or the exception it raised. A payload that does not parse is a failure."""
    if isinstance(result, Loaded | LoadFailed | LoadAborted):
        return result
    if isinstance(result, asyncio.CancelledError):
        return LoadAborted()
    if isinstance(result, BaseException):
        return LoadFailed(repr(result))
    if isinstance(result, Mapping):
        try:
            return Loaded.from_json(result)
        except PayloadError as error:
            return LoadFailed(str(error))
    if all(isinstance(s, SessionInfo) for s in result):
        return Loaded(tuple(result))
    return LoadFailed(f"unexpected load result {result!r}")


@dataclass(frozen=True, slots=True)
class LoadTicket:
    """One activation in flight; plain data, safe to keep across an ``await``.

    ``generation`` is both the task's load generation and the surface's selection generation.
    ``summary_revision`` / ``summary_pending_action`` are the task row as it was when the user
    activated it; ``settle`` revalidates them. ``force`` means "bypass any cached session list"
    (a pending task must load authoritative sessions, S09). ``supersedes`` lists the
    generations this activation made obsolete (same task, or the same surface's previous
    choice) so the UI can cancel their requests; their continuations are inert either way.
    """

    task_id: str
    generation: int
    summary_revision: int | None
    summary_pending_action: str | None
    force: bool
    surface_id: str
    phone: bool
    supersedes: tuple[int, ...] = ()

    @property
    def sheet_id(self) -> str | None:
        return self.surface_id if self.phone else None


class ActivationFlow:
    """Task activation for one client (browser tab): the desktop sidebar and every mounted
    phone sheet share one projection store and one per-task load registry; each surface owns
    its selection generation."""

    def __init__(self, projections: SessionProjections | None = None) -> None:
        self.projections = projections if projections is not None else SessionProjections()
        self._counter = GenerationCounter()
        self._loads = TaskLoads()
        self._surfaces: dict[str, Selection] = {DESKTOP: Selection(DESKTOP)}

    # -- surfaces -------------------------------------------------------------------------

    def surface(self, surface_id: str) -> Selection | None:
        return self._surfaces.get(surface_id)

    def mount_sheet(self, instance_id: str) -> SheetSelection:
        """A phone/tablet task sheet instance mounted. A remount under a reused id gets a
        fresh selection: tickets of the previous instance stay inert."""
        if instance_id == DESKTOP:
            raise ValueError(f"{DESKTOP!r} is reserved for the desktop sidebar")
        previous = self._surfaces.get(instance_id)
        if isinstance(previous, SheetSelection):
            previous.unmount()
        sheet = SheetSelection(instance_id)
        self._surfaces[instance_id] = sheet
        return sheet

    def close_sheet(self, instance_id: str) -> int | None:
        """The user closed this sheet: only its own in-flight choice becomes inert."""
        sheet = self._surfaces.get(instance_id)
        return sheet.close() if isinstance(sheet, SheetSelection) else None

    def unmount_sheet(self, instance_id: str) -> int | None:
        """This sheet left the page: its continuation may not navigate, select or close any
        sheet (S13). Returns the generation it invalidated, to cancel its request."""
        sheet = self._surfaces.pop(instance_id, None)
        return sheet.unmount() if isinstance(sheet, SheetSelection) else None

    # -- activation -----------------------------------------------------------------------

    def begin(self, task: TaskSummary, *, surface: str = DESKTOP) -> LoadTicket:
        """The user activated ``task`` on ``surface``. Snapshots the task row, supersedes the
        surface's previous choice and any older load of the same task."""
        selection = self._surfaces.get(surface)
        if selection is None:
            raise KeyError(f"no mounted surface {surface!r}")
        generation = self._counter.next()
        superseded = {
            g
            for g in (
                selection.claim(generation),
                self._loads.start(task.task_id, generation),
            )
            if g is not None
        }
        return LoadTicket(
            task_id=task.task_id,
            generation=generation,
            summary_revision=task.revision,
            summary_pending_action=task.pending_action,
            force=task.pending,
            surface_id=surface,
            phone=selection.phone,
            supersedes=tuple(sorted(superseded)),
        )

    def is_current(self, ticket: LoadTicket) -> bool:
        """The ticket still owns its surface's choice and its task's newest load."""
        selection = self._surfaces.get(ticket.surface_id)
        return (
            selection is not None
            and selection.owns(ticket.generation)
            and self._loads.is_current(ticket.task_id, ticket.generation)
        )

    def settle(
        self,
        ticket: LoadTicket,
        result: LoadResult,
        current_task: TaskSummary | None,
        *,
        remembered_session_id: str | None = None,
        active_session_id: str | None = None,
    ) -> Decision:
        """What the settled load does. Each ticket settles once; later calls are inert.

        In order: a superseded selection or load, an abort, or a task that disappeared
        (``current_task is None``, S41) → inert, and the response is not applied. Otherwise the
        response's sessions update the projection store (newer revisions only, S12); then a
        changed summary revision or pending action → task-only route (S11, S38); a failed load
        → task-only route; else :func:`choose_session`.
        """
        outcome = as_outcome(result)
        selection = self._surfaces.get(ticket.surface_id)
        owns = selection is not None and selection.owns(ticket.generation)
        load_current = self._loads.is_current(ticket.task_id, ticket.generation)
        self._loads.finish(ticket.task_id, ticket.generation)
        if selection is not None:
            selection.release(ticket.generation)

        if not owns:
            return inert(ticket.task_id, Reason.SELECTION_SUPERSEDED)
        if not load_current:
            return inert(ticket.task_id, Reason.LOAD_SUPERSEDED)
        if isinstance(outcome, LoadAborted):
            return inert(ticket.task_id, Reason.ABORTED)
        if current_task is None:
            return inert(ticket.task_id, Reason.TASK_GONE)
        if current_task.task_id != ticket.task_id:
            raise ValueError(f"summary of {current_task.task_id!r} for {ticket.task_id!r}")

        if isinstance(outcome, Loaded):
            self.projections.apply_sessions(outcome.sessions)
        if (
            current_task.revision != ticket.summary_revision
            or current_task.pending_action != ticket.summary_pending_action
        ):
            return task_route(
                ticket.task_id,
                Reason.SUMMARY_CHANGED,
                active_session_id=active_session_id,
                sheet_id=ticket.sheet_id,
            )
        if isinstance(outcome, LoadFailed):
            return task_route(
                ticket.task_id,
                Reason.LOAD_FAILED,
                active_session_id=active_session_id,
                sheet_id=ticket.sheet_id,
            )
        return choose_session(
            current_task,
            outcome.sessions,
            remembered_session_id,
            active_session_id=active_session_id,
            sheet_id=ticket.sheet_id,
            projections=self.projections,
        )
