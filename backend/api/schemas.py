"""Request bodies. Unknown fields, wrong types and oversized text are refused (400)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from backend.agents.profiles import NAME_PATTERN
from backend.clarifications.answers import Answer

MAX_PROMPT_CHARS = 64 * 1024
MAX_QUESTION_CHARS = 16 * 1024
MAX_TITLE_CHARS = 200
MAX_DESCRIPTION_CHARS = 64 * 1024
MAX_ID_CHARS = 64


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="after")
    def _no_nul_characters(self) -> Self:
        """PostgreSQL text cannot hold NUL (``\\x00``), so it is refused here, for every
        string of every body, instead of failing later as a database error (500)."""
        if _has_nul(self.model_dump()):
            raise ValueError("text must not contain NUL (\\x00) characters")
        return self


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_nul(v) for v in value)
    return False


#: A title is stripped first, so a blank one is refused as empty.
Title = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TITLE_CHARS)
]
PROFILE_NAME = NAME_PATTERN.pattern
Id = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS)]


class CreateTaskBody(Body):
    title: Title
    description: str = Field(default="", max_length=MAX_DESCRIPTION_CHARS)
    workspace_id: Id | None = None
    workflow_id: Id | None = None


class MoveTaskBody(Body):
    workflow_step_id: Id


class CreateSessionBody(Body):
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    #: The agent that runs the session (a configured profile; an unknown one is a 400, never
    #: a silent substitute). Absent: the server's default profile (``mock`` unless configured).
    agent_profile: str | None = Field(default=None, pattern=PROFILE_NAME, max_length=100)
    is_primary: bool | None = None


class PromptBody(Body):
    content: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)


class SessionStateBody(Body):
    state: Literal["COMPLETED", "FAILED", "CANCELLED"]


class AgentMessageBody(Body):
    turn_id: str = Field(min_length=1, max_length=64)
    prompt_generation: int = Field(ge=0)
    content: str = Field(max_length=MAX_PROMPT_CHARS)


class AgentQuestion(Body):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    options: list[str] = Field(default_factory=list, max_length=20)
    multi_select: bool = False


class AgentClarificationBody(Body):
    turn_id: str = Field(min_length=1, max_length=64)
    prompt_generation: int = Field(ge=0)
    questions: list[AgentQuestion] = Field(min_length=1, max_length=20)
    wait_seconds: float = Field(ge=0, le=24 * 3600)


class AgentTurnCompleteBody(Body):
    prompt_generation: int = Field(ge=0)
    status: Literal["completed", "failed"]


class AnswerBody(Body):
    message_id: str = Field(min_length=1, max_length=64)
    option_ids: list[str] = Field(default_factory=list, max_length=20)
    text: str = Field(default="", max_length=MAX_QUESTION_CHARS)


class RespondBody(Body):
    answers: list[AnswerBody] | None = Field(default=None, max_length=20)
    rejected: bool = False
    reason: str | None = Field(default=None, max_length=MAX_QUESTION_CHARS)

    def parsed_answers(self) -> list[Answer]:
        """The answers as the responder takes them (none for a Skip without answers); one
        conversion for the REST route and the UI, which both validate with this model."""
        return [Answer(a.message_id, tuple(a.option_ids), a.text) for a in self.answers or []]
