"""Generations that decide whether a delayed continuation may still act.

Two independent guards, both fed from one monotonic counter per client so that no number is
ever reused (a sheet remounted under the same instance id cannot mistake an old ticket for its
own):

- :class:`TaskLoads` — the newest authoritative session load per task. A newer load for the
  same task supersedes (aborts) older ones, so an older response that finishes last is inert
  (S12, S42).
- :class:`Selection` — the in-flight choice of one surface: the desktop sidebar, or one mounted
  phone sheet (:class:`SheetSelection`). A newer choice, closing or unmounting invalidates only
  that surface's own choice; other sheets are untouched (S13, S43).
"""

from __future__ import annotations


class GenerationCounter:
    """Monotonic generation numbers, unique within one client."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last += 1
        return self._last


class TaskLoads:
    """The newest load generation per task. Entries are dropped when their load finishes, so
    the map holds at most the tasks with a load in flight."""

    def __init__(self) -> None:
        self._latest: dict[str, int] = {}

    def start(self, task_id: str, generation: int) -> int | None:
        """Make ``generation`` the task's current load; returns the load it supersedes (the UI
        should cancel that request), if one was still in flight."""
        previous = self._latest.get(task_id)
        self._latest[task_id] = generation
        return previous

    def is_current(self, task_id: str, generation: int) -> bool:
        return self._latest.get(task_id) == generation

    def finish(self, task_id: str, generation: int) -> None:
        """The load settled (whatever the outcome); only the current one clears the entry."""
        if self._latest.get(task_id) == generation:
            del self._latest[task_id]

    def in_flight(self, task_id: str) -> int | None:
        return self._latest.get(task_id)


class Selection:
    """The selection generation of one activation surface.

    ``phone`` surfaces close themselves when an activation opens something; the desktop sidebar
    does not.
    """

    phone = False

    def __init__(self, surface_id: str) -> None:
        self.surface_id = surface_id
        self._choice: int | None = None

    @property
    def choice(self) -> int | None:
        """The generation of this surface's in-flight choice, if any."""
        return self._choice

    def claim(self, generation: int) -> int | None:
        """A new activation on this surface; returns the choice it supersedes."""
        previous = self._choice
        self._choice = generation
        return previous

    def owns(self, generation: int) -> bool:
        return self._choice == generation

    def release(self, generation: int) -> None:
        """The choice settled; a newer choice is left alone."""
        if self._choice == generation:
            self._choice = None

    def invalidate(self) -> int | None:
        """Drop the in-flight choice (its continuation becomes inert); returns it."""
        previous = self._choice
        self._choice = None
        return previous


class SheetSelection(Selection):
    """One mounted phone task sheet instance, keyed by its instance id. Closing or unmounting it
    invalidates only its own in-flight choice."""

    phone = True

    def __init__(self, instance_id: str) -> None:
        super().__init__(instance_id)
        self.mounted = True

    @property
    def instance_id(self) -> str:
        return self.surface_id

    def close(self) -> int | None:
        """The user closed the sheet; it stays mounted and may be opened again."""
        return self.invalidate()

    def unmount(self) -> int | None:
        """The sheet left the page (e.g. a responsive-layout change); nothing of it may act."""
        self.mounted = False
        return self.invalidate()

    def claim(self, generation: int) -> int | None:
        if not self.mounted:
            raise RuntimeError(f"sheet {self.surface_id!r} is unmounted")
        return super().claim(generation)
