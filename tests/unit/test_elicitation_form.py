"""An ACP form elicitation as a clarification bundle, and the bundle's outcome as the
elicitation's response (``backend/agents/elicitation.py``, pure)."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import (
    AcceptElicitationResponse,
    CancelElicitationResponse,
    DeclineElicitationResponse,
    ElicitationSchema,
)

from backend.agents.elicitation import ElicitationForm, UnsupportedForm
from backend.clarifications.store import Question
from backend.orchestrator.live import ClarificationResult


def schema(properties: dict[str, Any]) -> ElicitationSchema:
    return ElicitationSchema.model_validate({"type": "object", "properties": properties})


FORM = schema(
    {
        "db": {"type": "string", "title": "Database", "enum": ["sqlite", "postgres"]},
        "env": {
            "type": "string",
            "title": "Environment",
            "oneOf": [{"const": "stg", "title": "Staging"}, {"const": "prd", "title": "Prod"}],
        },
        "targets": {
            "type": "array",
            "title": "Targets",
            "items": {"anyOf": [{"const": "l", "title": "Linux"}, {"const": "m", "title": "Mac"}]},
        },
        "tags": {
            "type": "array",
            "description": "Tags",
            "items": {"type": "string", "enum": ["a", "b"]},
        },
        "force": {"type": "boolean", "title": "Force?"},
        "count": {"type": "integer", "title": "How many?"},
        "ratio": {"type": "number"},
        "name": {"type": "string", "title": "Name"},
    }
)


def answer(position: int, option_ids: tuple[str, ...] = (), text: str = "") -> dict[str, Any]:
    return {"position": position, "option_ids": list(option_ids), "text": text}


def test_each_property_is_a_question_and_the_message_is_said_first() -> None:
    form = ElicitationForm.from_schema("Before I deploy:", FORM)
    assert form.lead == "Before I deploy:"
    assert form.questions == (
        Question("Database", ("sqlite", "postgres")),
        Question("Environment", ("Staging", "Prod")),
        Question("Targets", ("Linux", "Mac"), multi_select=True),
        Question("Tags", ("a", "b"), multi_select=True),
        Question("Force?", ("Yes", "No")),
        Question("How many?"),
        Question("ratio"),  # no title, no description: the property's name
        Question("Name"),
    )


def test_a_single_property_is_asked_with_the_message() -> None:
    form = ElicitationForm.from_schema("Which DB?", schema({"db": FORM.properties["db"]}))
    assert (form.lead, form.questions) == (None, (Question("Which DB?", ("sqlite", "postgres")),))


def test_answers_come_back_as_the_schema_types() -> None:
    form = ElicitationForm.from_schema("Before I deploy:", FORM)
    content = form.content(
        [
            answer(0, ("o2",)),
            answer(1, ("o1",)),
            answer(2, ("o1", "o2")),
            answer(3, ("o2",)),
            answer(4, ("o2",)),
            answer(5, text=" 3 "),
            answer(6, text="0.5"),
            answer(7, text="kandev"),
        ]
    )
    assert content == {
        "db": "postgres",
        "env": "stg",
        "targets": ["l", "m"],
        "tags": ["b"],
        "force": False,
        "count": 3,
        "ratio": 0.5,
        "name": "kandev",
    }


def test_unanswered_unparsable_and_unknown_answers_are_left_out() -> None:
    form = ElicitationForm.from_schema("Before I deploy:", FORM)
    content = form.content(
        [answer(0, text="mysql"), answer(5, text="three"), answer(99, ("o1",)), {"text": "x"}]
    )
    assert content == {}


@pytest.mark.parametrize(
    ("properties", "why"),
    [
        ({}, "no property"),
        ({"when": {"type": "date"}}, "type Kandev cannot ask"),
        ({"a": {"type": "array", "items": {"type": "string", "enum": []}}}, "nothing to pick"),
        ({"db": {"type": "string", "enum": [f"o{i}" for i in range(21)]}}, "property 'db'"),
        ({"db": {"type": "string", "enum": ["x" * 201]}}, "property 'db'"),
        ({f"p{i}": {"type": "string"} for i in range(11)}, "at most 10"),
    ],
)
def test_forms_that_cannot_be_a_bundle_are_refused(properties: dict, why: str) -> None:
    with pytest.raises(UnsupportedForm, match=why):
        ElicitationForm.from_schema("?", schema(properties))


def test_the_outcome_becomes_the_response() -> None:
    form = ElicitationForm.from_schema("Which DB?", schema({"db": FORM.properties["db"]}))
    accepted = form.response(ClarificationResult("answered", "p1", (answer(0, ("o1",)),)))
    assert accepted == AcceptElicitationResponse(action="accept", content={"db": "sqlite"})
    declined = form.response(ClarificationResult("rejected", "p1"))
    assert isinstance(declined, DeclineElicitationResponse)
    detached = form.response(ClarificationResult("detached", "p1"))
    assert isinstance(detached, CancelElicitationResponse)
    kandev = detached.field_meta["kandev"]
    assert (kandev["outcome"], kandev["pending_id"]) == ("detached", "p1")
    assert "next prompt" in kandev["message"]
    expired = form.response(ClarificationResult("expired", "p1"))
    assert expired.field_meta["kandev"]["outcome"] == "expired"
