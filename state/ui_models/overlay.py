"""The overlay's questions and the answers the user picked or typed; a refresh of the bundle
keeps the choices already made on the same questions. A permission request is a bundle of one
question whose options carry a ``kind`` (``allow_once``, ``reject_once``, ...)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from state.ui_models.labels import as_text


@dataclass
class OptionItem:
    id: str
    label: str
    selected: bool = False
    #: A permission option that grants (``allow_*``): shown as the primary choice.
    allows: bool = False


@dataclass
class QuestionItem:
    """One question of the overlay's bundle, with what the user picked or typed so far."""

    message_id: str
    question: str
    options: list[OptionItem] = field(default_factory=list)
    text: str = ""
    #: Several options may be picked; otherwise picking one clears the others.
    multi_select: bool = False

    @property
    def answered(self) -> bool:
        return any(o.selected for o in self.options) or bool(self.text.strip())


def question_items(
    bundle: Mapping[str, Any] | None, previous: Sequence[QuestionItem] = ()
) -> list[QuestionItem]:
    """The bundle's questions; choices the user already made on the same questions survive a
    refresh of the bundle (a live event must not wipe a half-filled answer)."""
    if not bundle:
        return []
    kept = {q.message_id: q for q in previous}
    items = []
    for raw in bundle.get("questions", []):
        old = kept.get(raw["message_id"])
        chosen = {o.id for o in old.options if o.selected} if old else set()
        options = [
            OptionItem(
                as_text(o.get("id")),
                as_text(o.get("label")),
                as_text(o.get("id")) in chosen,
                allows=as_text(o.get("kind")).startswith("allow"),
            )
            for o in raw.get("options", [])
            if isinstance(o, Mapping)
        ]
        items.append(
            QuestionItem(
                message_id=raw["message_id"],
                question=as_text(raw.get("question")),
                options=options,
                text=old.text if old else "",
                multi_select=raw.get("multi_select") is True,
            )
        )
    return items


def choose_option(
    questions: Sequence[QuestionItem], message_id: str, option_id: str
) -> list[QuestionItem]:
    """Pick an option of a question: picking a chosen option again clears it; picking another
    replaces the choice, unless the question is multi-select (then each option toggles)."""
    out = []
    for q in questions:
        if q.message_id != message_id:
            out.append(q)
            continue
        out.append(
            dataclasses.replace(
                q,
                options=[
                    dataclasses.replace(o, selected=_picked(q, o, option_id)) for o in q.options
                ],
            )
        )
    return out


def _picked(question: QuestionItem, option: OptionItem, option_id: str) -> bool:
    if option.id == option_id:
        return not option.selected
    return option.selected and question.multi_select


def set_answer_text(
    questions: Sequence[QuestionItem], message_id: str, text: str
) -> list[QuestionItem]:
    return [
        dataclasses.replace(q, text=text) if q.message_id == message_id else q for q in questions
    ]


def answers_payload(questions: Sequence[QuestionItem]) -> list[dict[str, Any]]:
    """The ``answers`` of a respond body: every question, its chosen options and its text."""
    return [
        {
            "message_id": q.message_id,
            "option_ids": [o.id for o in q.options if o.selected],
            "text": q.text.strip(),
        }
        for q in questions
    ]


def first_unanswered(questions: Sequence[QuestionItem]) -> int | None:
    """Index of the first question without an answer, or ``None`` when all are answered."""
    return next((i for i, q in enumerate(questions) if not q.answered), None)
