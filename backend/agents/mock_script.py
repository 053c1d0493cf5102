"""The mock agent's script language: prompt content -> the steps of one turn (pure).

Content is read line by line; surrounding whitespace is ignored and blank lines are skipped.
A line is a command when its first word is one of:

- ``/reply TEXT`` — post TEXT as a message. Every ``/reply`` line is its own message, posted
  in the order written. ``/reply`` without text is ignored.
- ``/ask QUESTION | OPTION | OPTION`` — one question; options are optional and empty ones are
  dropped. All ``/ask`` lines of a prompt form ONE bundle, asked at the position of the first
  ``/ask`` line. ``/ask`` without a question is ignored. ``/askmany`` is the same for a
  question whose options may be picked several at once (multi-select).
- ``/wait SECONDS`` — the bundle's wait (a number >= 0), wherever the line stands; the last
  ``/wait`` wins. Without it the wait is the caller's default (``KANDEV_CLARIFICATION_WAIT_S``,
  600 s). ``/disconnect`` anywhere forces the wait to 0 (detach at once) and beats ``/wait``.
  Both have no effect in a prompt without ``/ask``.
- ``/elicit`` anywhere asks the prompt's bundle natively, with ACP ``elicitation/create`` (a
  form: one property per question) instead of the MCP tool; the wait is then the agent's own:
  when it passes, the agent stops waiting and ends its turn.
- ``/permit TITLE | OPTION | OPTION`` — ask the user's permission for a tool call titled TITLE
  at that point (ACP ``session/request_permission``; options optional, default ``Allow`` and
  ``Reject``; the first option is ``allow_once``, the others ``reject_once``). ``/permit``
  without a title is ignored.
- ``/sleep MS`` — pause MS milliseconds (an integer >= 0) before the next step.
- ``/fail`` — end the turn with status ``failed`` at that point; later steps do not run.

A command with a malformed argument (``/sleep soon``) and any other line is plain text.
Consecutive plain-text lines form one ``Echo: <text>`` reply (lines joined by a newline) at
their position, so a prompt of plain text only gets exactly one echo of the whole text.
A prompt with no step at all (blank) completes the turn without a message.

What runs after the bundle is the agent's business (``mock_acp.py``): after an answer it says
``Got: ...`` (:func:`format_answers`) and continues with the steps written after the first
``/ask``; after a Skip it says ``Skipped.`` and continues; after a detach, a cancellation or
``expired`` it ends the turn at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

DEFAULT_WAIT_S = 600.0
DEFAULT_PERMIT_OPTIONS = ("Allow", "Reject")
#: What the agent says after a ``/permit`` that was not granted any option.
PERMIT_DECLINED = "Permission cancelled."


@dataclass(frozen=True, slots=True)
class Reply:
    text: str


@dataclass(frozen=True, slots=True)
class Sleep:
    ms: int


@dataclass(frozen=True, slots=True)
class Fail:
    pass


@dataclass(frozen=True, slots=True)
class Permit:
    """A permission request for one tool call; the agent then says what the user chose."""

    title: str
    options: tuple[str, ...] = DEFAULT_PERMIT_OPTIONS


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    options: tuple[str, ...] = ()
    multi_select: bool = False


@dataclass(frozen=True, slots=True)
class Ask:
    """One clarification bundle: every ``/ask`` of the prompt, with the bundle's wait."""

    questions: tuple[Question, ...]
    wait_seconds: float
    #: Asked with ACP ``elicitation/create`` rather than the MCP tool.
    native: bool = False


Step = Reply | Sleep | Fail | Ask | Permit


def parse_script(content: str, default_wait_s: float = DEFAULT_WAIT_S) -> list[Step]:
    """Turn prompt content into steps; never raises (anything unparsable is plain text)."""
    steps: list[Step | None] = []  # None marks where the bundle goes
    questions: list[Question] = []
    wait_s = default_wait_s
    disconnect = False
    native = False
    echo: list[str] = []

    def flush_echo() -> None:
        if echo:
            steps.append(Reply("Echo: " + "\n".join(echo)))
            echo.clear()

    for raw in content.splitlines():
        line = raw.strip()
        if not line:
            continue
        command, _, arg = line.partition(" ")
        arg = arg.strip()
        if command == "/reply":
            flush_echo()
            if arg:
                steps.append(Reply(arg))
        elif command in ("/ask", "/askmany"):
            flush_echo()
            question = _parse_question(arg, multi_select=command == "/askmany")
            if question is not None:
                if not questions:
                    steps.append(None)
                questions.append(question)
        elif command == "/permit":
            flush_echo()
            permit = _parse_permit(arg)
            if permit is not None:
                steps.append(permit)
        elif command == "/wait" and (seconds := _non_negative_float(arg)) is not None:
            wait_s = seconds
        elif command == "/disconnect" and not arg:
            disconnect = True
        elif command == "/elicit" and not arg:
            native = True
        elif command == "/sleep" and (ms := _non_negative_int(arg)) is not None:
            flush_echo()
            steps.append(Sleep(ms))
        elif command == "/fail" and not arg:
            flush_echo()
            steps.append(Fail())
        else:
            echo.append(line)
    flush_echo()

    bundle = Ask(tuple(questions), 0.0 if disconnect else wait_s, native)
    return [bundle if step is None else step for step in steps]


def questions_payload(ask: Ask) -> list[dict[str, object]]:
    """The bundle's questions as the MCP tool takes them."""
    return [
        {"question": q.question, "options": list(q.options), "multi_select": q.multi_select}
        for q in ask.questions
    ]


def _parse_question(arg: str, *, multi_select: bool) -> Question | None:
    question, *options = (part.strip() for part in arg.split("|"))
    if not question:
        return None
    return Question(question, tuple(option for option in options if option), multi_select)


def _parse_permit(arg: str) -> Permit | None:
    question = _parse_question(arg, multi_select=False)
    if question is None:
        return None
    return Permit(question.question, question.options or DEFAULT_PERMIT_OPTIONS)


def _non_negative_float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _non_negative_int(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def format_answers(answers: Any) -> str:
    """``Got: question: label, label, text; question: ...`` from the protocol's answers list."""
    parts = []
    for answer in answers if isinstance(answers, list) else []:
        if not isinstance(answer, dict):
            continue
        labels = answer.get("option_labels")
        values = [str(label) for label in labels] if isinstance(labels, list) else []
        if answer.get("text"):
            values.append(str(answer["text"]))
        parts.append(f"{answer.get('question', '')}: {', '.join(values)}")
    return "Got: " + "; ".join(parts)


def answer_reply(answer: dict[str, Any]) -> str:
    """The reply to a resume prompt: ``Skipped.`` for a skipped bundle, else ``Got: ...``."""
    if answer.get("rejected") is True:
        return "Skipped."
    return format_answers(answer.get("answers"))
