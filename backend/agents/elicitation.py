"""An agent's native question (ACP ``elicitation/create``, form mode) as a clarification
bundle, and the bundle's outcome as the elicitation's response. Pure: the executor
(``acp_executor.py``) holds the pending request as the live waiter.

Each form property becomes one question of one bundle, so the user answers it in the same
overlay as a question asked through the MCP tool, under the same lifecycle:

- a string with ``enum`` / ``oneOf`` is a single-choice question, an ``array`` of such items a
  multi-select one, a boolean a Yes / No choice; a plain string, number or integer is a free
  text question (a number that does not parse is left out of the content);
- the request's ``message`` is the question when the form has one property; with several, it
  is said first (a transcript message) and each property's title is its question;
- the user's answer comes back as ``accept`` with the content the schema asks for, a Skip as
  ``decline``, and a bundle that detached (the wait ended, or the prompt that asked ended) as
  ``cancel`` with ``_meta.kandev.outcome = "detached"``: the answer will arrive as the agent's
  next prompt, exactly like the MCP tool's ``detached``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from acp.schema import (
    AcceptElicitationResponse,
    CancelElicitationResponse,
    DeclineElicitationResponse,
    ElicitationBooleanPropertySchema,
    ElicitationIntegerPropertySchema,
    ElicitationMultiSelectPropertySchema,
    ElicitationNumberPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    TitledMultiSelectItems,
)
from pydantic import ValidationError

from backend.agent_tools import DETACHED_HINT, AskedQuestion
from backend.clarifications.store import Question
from backend.orchestrator.live import ClarificationResult

FieldKind = Literal["choice", "choices", "boolean", "text", "number", "integer"]
ElicitationResponse = (
    AcceptElicitationResponse | DeclineElicitationResponse | CancelElicitationResponse
)
BOOLEAN_LABELS = ("Yes", "No")
#: As many questions as the MCP tool takes in one call.
MAX_QUESTIONS = 10


class UnsupportedForm(ValueError):
    """The form cannot be asked as a bundle (an unknown property type, no property, too many
    or too long questions or options): the agent gets ``invalid_params`` with this message."""


@dataclass(frozen=True, slots=True)
class FormField:
    """One property: how its answer becomes the content value."""

    name: str
    kind: FieldKind
    #: The option values (``const`` / enum entries), in the question's option order.
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ElicitationForm:
    #: Said before the questions (``None`` when the message is the only question).
    lead: str | None
    questions: tuple[Question, ...]
    fields: tuple[FormField, ...]

    @classmethod
    def from_schema(cls, message: str, schema: ElicitationSchema) -> ElicitationForm:
        properties = schema.properties or {}
        if not properties:
            raise UnsupportedForm("the form has no property to ask about")
        if len(properties) > MAX_QUESTIONS:
            raise UnsupportedForm(f"a form may ask at most {MAX_QUESTIONS} things at once")
        single = len(properties) == 1
        questions, fields = [], []
        for name, prop in properties.items():
            label = getattr(prop, "title", None) or getattr(prop, "description", None) or name
            text = message if single and message.strip() else label
            field, options = _field(name, prop)
            try:
                asked = AskedQuestion(
                    question=text, options=list(options), multi_select=field.kind == "choices"
                )
            except ValidationError as error:
                raise UnsupportedForm(f"property {name!r}: {_first_error(error)}") from None
            questions.append(Question(asked.question, tuple(asked.options), asked.multi_select))
            fields.append(field)
        lead = None if single or not message.strip() else message
        return cls(lead, tuple(questions), tuple(fields))

    def content(self, answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """The accepted content: each answered question's value, as its property's type."""
        content: dict[str, Any] = {}
        for answer in answers:
            position = answer.get("position")
            if not isinstance(position, int) or not 0 <= position < len(self.fields):
                continue
            field = self.fields[position]
            value = _value(field, _chosen(answer), str(answer.get("text") or "").strip())
            if value is not None:
                content[field.name] = value
        return content

    def response(self, result: ClarificationResult) -> ElicitationResponse:
        if result.outcome == "answered":
            return AcceptElicitationResponse(action="accept", content=self.content(result.answers))
        if result.outcome == "rejected":
            return DeclineElicitationResponse(action="decline")
        return cancelled(result.outcome, result.pending_id)


def cancelled(outcome: str, pending_id: str | None = None, message: str | None = None) -> Any:
    """``cancel``, saying why in ``_meta.kandev`` (``detached``: the answer comes later)."""
    kandev: dict[str, Any] = {"outcome": outcome}
    if pending_id is not None:
        kandev["pending_id"] = pending_id
    if outcome == "detached":
        kandev["message"] = DETACHED_HINT
    elif message is not None:
        kandev["message"] = message
    return CancelElicitationResponse(action="cancel", field_meta={"kandev": kandev})


def _field(name: str, prop: Any) -> tuple[FormField, tuple[str, ...]]:
    """The property's field and its option labels."""
    if isinstance(prop, ElicitationStringPropertySchema):
        if prop.one_of:
            return FormField(name, "choice", tuple(o.const for o in prop.one_of)), tuple(
                o.title for o in prop.one_of
            )
        if prop.enum:
            return FormField(name, "choice", tuple(prop.enum)), tuple(prop.enum)
        return FormField(name, "text"), ()
    if isinstance(prop, ElicitationMultiSelectPropertySchema):
        items = prop.items
        if isinstance(items, TitledMultiSelectItems):
            values, labels = [o.const for o in items.any_of], [o.title for o in items.any_of]
        else:
            values = labels = list(getattr(items, "enum", None) or [])
        if not values:
            raise UnsupportedForm(f"property {name!r} offers nothing to pick")
        return FormField(name, "choices", tuple(values)), tuple(labels)
    if isinstance(prop, ElicitationBooleanPropertySchema):
        return FormField(name, "boolean", BOOLEAN_LABELS), BOOLEAN_LABELS
    if isinstance(prop, ElicitationIntegerPropertySchema):
        return FormField(name, "integer"), ()
    if isinstance(prop, ElicitationNumberPropertySchema):
        return FormField(name, "number"), ()
    raise UnsupportedForm(f"property {name!r} has a type Kandev cannot ask about")


def _chosen(answer: Mapping[str, Any]) -> list[int]:
    """The chosen options' indexes (option ids are ``o1``, ``o2``, ... in order)."""
    indexes = []
    for option_id in answer.get("option_ids") or []:
        digits = str(option_id)[1:]
        if digits.isdigit():
            indexes.append(int(digits) - 1)
    return indexes


def _value(field: FormField, chosen: list[int], text: str) -> Any:
    picked = [field.values[i] for i in chosen if 0 <= i < len(field.values)]
    if field.kind == "choices":
        return picked or None
    if field.kind == "choice":
        return picked[0] if picked else None
    if field.kind == "boolean":
        return picked[0] == BOOLEAN_LABELS[0] if picked else None
    if not text:
        return None
    if field.kind == "text":
        return text
    try:
        return int(text) if field.kind == "integer" else float(text)
    except ValueError:
        return None


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {first.get('msg', 'invalid')}" if where else str(first.get("msg"))
