"""Telling clients what a permission write did: the message events (with the session's
revisioned ``pending_action``, as every message event carries) and, after a response's
outcome, the task summary acknowledged at once.

Always after the commit and only for the rows a statement returned, so a repeated pass
publishes nothing. A failed publication or acknowledgement cannot undo the durable outcome:
it is logged, and reads and the summary projector converge on what the database says.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from backend.events.publisher import EventPublisher
from backend.projections.summaries import TaskSummaries

log = logging.getLogger(__name__)


class Announcer:
    def __init__(self, events: EventPublisher, summaries: TaskSummaries) -> None:
        self.events = events
        self.summaries = summaries

    async def rows(
        self, event_type: str, rows: Sequence[dict[str, Any]], *, acknowledge: bool = False
    ) -> None:
        """Publish ``event_type`` for each row; with ``acknowledge``, refresh their tasks'
        summaries before returning (a response's caller reads the task next)."""
        try:
            for row in rows:
                await self.events.message(event_type, row)
        except Exception as error:
            log.warning("permission rows not published (reads converge): %r", error)
        if not (acknowledge and rows):
            return
        try:
            await self.summaries.refresh({row["task_id"] for row in rows})
        except Exception as error:
            log.warning("task summary not acknowledged (the projector repairs it): %r", error)
