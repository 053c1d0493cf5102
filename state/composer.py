"""The composer of the open session: a new prompt is a newer turn, which supersedes an open
question (the server decides; the composer only reports its refusal)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import reflex as rx

from state import gateway
from state.session_view import SessionViewState


class ComposerState(SessionViewState):
    draft: str = ""
    composer_busy: bool = False
    composer_error: str = ""

    @rx.event
    def set_draft(self, value: str) -> None:
        self.draft = value

    @rx.event(background=True)
    async def send_prompt(self, form_data: dict[str, Any] | None = None) -> AsyncIterator[Any]:
        """Send the composer's text to the active session.

        The form's own value wins over ``draft``: Enter may submit before the debounced
        ``on_change`` of the last keystrokes arrived.
        """
        submitted = str((form_data or {}).get("content", "") or "")
        async with self:
            content = (submitted or self.draft or "").strip()
            session_id = self.active_session_id
            if not content or not session_id or self.composer_busy:
                return
            self.composer_busy = True
            self.composer_error = ""
        error = None
        try:
            await gateway.prompt(session_id, content)
        except Exception as exc:
            error = gateway.describe(exc)
        async with self:
            self.composer_busy = False
            if error is None:
                if self.active_session_id == session_id:
                    self.draft = ""
            else:
                self.composer_error = error.message
        yield
