"""Admission: what may start a turn, and what may still write into one.

A prompt starts a turn through one compare-and-set on the session row (state → RUNNING,
generation + 1), so concurrent prompts (in one process or several) see exactly one winner and
the others get ``session_busy``. An agent callback writes into its turn only while that turn is
the session's current one at its generation (``require_current``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, exists, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from backend.authority.sql import DISPATCH_PENDING, TERMINAL_STATES, current_turn_id
from backend.clock import utcnow
from backend.db.json import json_merge, json_text
from backend.db.tables import messages, sessions, turns
from backend.errors import Conflict, NotFound, SessionBusy, SessionTerminal, TurnNotCurrent
from backend.ids import new_id
from backend.orchestrator.expectation import AnswerExpectation
from backend.request_evidence import DELIVERY_INTENT
from backend.vocabulary import TERMINAL_SESSION_STATES, MessageType, SessionState, TurnMarker
from backend.workers import owner_stamp

#: Reservation metadata: the session state the reservation displaced (restored on rollback).
PRIOR_STATE = "prompt_dispatch_prior_state"

#: Turn metadata of an ordinary turn whose prompt the agent has not acknowledged yet.
DISPATCH_UNACKNOWLEDGED = TurnMarker.DISPATCH_UNACKNOWLEDGED.value

#: States in which a session accepts a prompt.
ADMITTING_STATES = (
    SessionState.CREATED.value,
    SessionState.IDLE.value,
    SessionState.WAITING_FOR_INPUT.value,
)


class StaleAnswer(Conflict):
    code = "stale_answer"


@dataclass(frozen=True, slots=True)
class AdmittedTurn:
    session_id: str
    task_id: str
    turn_id: str
    prompt_generation: int
    #: The session's agent profile: read where a prompt is admitted (the one place that
    #: dispatches), ``None`` where a turn is only checked.
    agent_profile: str | None = None
    #: The agent's own id for the conversation, once it has one (read with the profile).
    agent_session_id: str | None = None
    #: The worker running the session's agent, with several workers (read with the profile).
    agent_worker: str | None = None


async def admit_prompt(
    conn: AsyncConnection,
    session_id: str,
    turn_metadata: dict[str, Any] | None = None,
    expect: AnswerExpectation | None = None,
) -> AdmittedTurn:
    """Claim the session for a new turn and insert that turn.

    With empty ``turn_metadata`` the turn is published and current at once; a reservation
    passes ``prompt_dispatch_pending`` (and its recovery identity) to stay unpublished.
    With ``expect`` (the watchdog's fallback) the session must still be in exactly that turn
    and generation with no agent activity since: revalidated inside this same statement.
    """
    ordinary = expect is None and not (turn_metadata and turn_metadata.get(DISPATCH_PENDING))
    admissible = (
        expect.still_undelivered() if expect is not None else sessions.c.state.in_(ADMITTING_STATES)
    )
    if ordinary:
        # A response claim owns the current turn until it is delivered or released: a newer
        # turn may not supersede the answer in flight (it would strand or re-arm it).
        admissible = and_(admissible, ~answer_in_flight(session_id))
    if turn_metadata and turn_metadata.get(DISPATCH_PENDING):
        # A reservation remembers whom it displaced, so a rollback can hand the session back
        # to exactly that generation and state (its predecessor turn may still be running).
        prior = (
            await conn.execute(
                select(sessions.c.state, sessions.c.prompt_generation)
                .where(sessions.c.id == session_id)
                .with_for_update()
            )
        ).first()
        if prior is not None:
            turn_metadata = {**turn_metadata, PRIOR_STATE: prior.state}
            admissible = and_(admissible, sessions.c.prompt_generation == prior.prompt_generation)
    now = utcnow()
    claimed = (
        await conn.execute(
            update(sessions)
            .where(sessions.c.id == session_id, admissible)
            .values(
                state=SessionState.RUNNING.value,
                prompt_generation=sessions.c.prompt_generation + 1,
                updated_at=now,
            )
            .returning(
                sessions.c.task_id,
                sessions.c.prompt_generation,
                sessions.c.agent_profile,
                sessions.c.agent_session_id,
                sessions.c.agent_worker,
            )
        )
    ).first()
    if claimed is None:
        if expect is not None:
            raise StaleAnswer("the answer's turn is no longer waiting for it")
        state = (
            await conn.execute(select(sessions.c.state).where(sessions.c.id == session_id))
        ).scalar_one_or_none()
        if state is None:
            raise NotFound("no such session")
        if state in TERMINAL_SESSION_STATES:
            raise SessionTerminal(f"the session is {state}")
        if state in ADMITTING_STATES:
            raise SessionBusy("an answer to the agent's question is being delivered")
        raise SessionBusy("the agent is working on a turn")
    task_id, generation, agent_profile, agent_session_id, agent_worker = claimed
    turn_id = new_id()
    await conn.execute(
        insert(turns).values(
            id=turn_id,
            session_id=session_id,
            task_id=task_id,
            prompt_generation=generation,
            started_at=now,
            created_at=now,
            # An ordinary turn is marked until the agent acknowledges its prompt, so start-up
            # can tell a dispatch that died with the process (recovery fails that turn).
            metadata=turn_metadata
            or ({DISPATCH_UNACKNOWLEDGED: True, **owner_stamp()} if ordinary else {}),
        )
    )
    return AdmittedTurn(
        session_id,
        task_id,
        turn_id,
        int(generation),
        agent_profile,
        agent_session_id,
        agent_worker,
    )


def answer_in_flight(session_id: str) -> Any:
    """SQL: a response holds a delivery intent on a question of the session."""
    return exists().where(
        messages.c.session_id == session_id,
        messages.c.type == MessageType.CLARIFICATION_REQUEST.value,
        json_text(messages.c.metadata, DELIVERY_INTENT).is_not(None),
    )


_ACKNOWLEDGE = (
    update(turns)
    .where(turns.c.id == bindparam("turn"))
    .values(metadata=json_merge(turns.c.metadata, {DISPATCH_UNACKNOWLEDGED: None}))
)


async def acknowledge(conn: AsyncConnection, turn_id: str) -> None:
    """The agent acknowledged the ordinary turn's prompt."""
    await conn.execute(_ACKNOWLEDGE, {"turn": turn_id})


def _set_state_statement(while_open: bool) -> Any:
    """:func:`set_state_for_generation`'s compare-and-set, built once per form (it runs
    several times per answer)."""
    conditions = [
        sessions.c.id == bindparam("session"),
        sessions.c.prompt_generation == bindparam("generation"),
        sessions.c.state.not_in(TERMINAL_STATES),
    ]
    if while_open:
        conditions.append(
            exists().where(turns.c.id == bindparam("open_turn"), turns.c.completed_at.is_(None))
        )
    return (
        update(sessions)
        .where(*conditions)
        .values(state=bindparam("new_state"), updated_at=bindparam("now"))
        .returning(sessions.c.id)
    )


_SET_STATE = {while_open: _set_state_statement(while_open) for while_open in (False, True)}


async def set_state_for_generation(
    conn: AsyncConnection,
    session_id: str,
    generation: int,
    state: SessionState,
    *,
    while_open: str | None = None,
) -> bool:
    """Set a live session's state only while ``generation`` still owns it: whatever a stale
    actor (a late ready event, a pause, recovery) wants cannot touch a newer turn's session.
    With ``while_open``, only while that turn has not ended either."""
    result = await conn.execute(
        _SET_STATE[while_open is not None],
        {
            "session": session_id,
            "generation": generation,
            "open_turn": while_open,
            "new_state": state.value,
            "now": utcnow(),
        },
    )
    return result.first() is not None


async def require_current(
    conn: AsyncConnection,
    session_id: str,
    turn_id: str,
    generation: int,
    *,
    open_turn: bool = False,
) -> AdmittedTurn:
    """The callback's turn, if it is still the session's current turn and generation
    (and, with ``open_turn``, not yet completed: a question asked in a turn that already
    ended — paused, or failed by start-up — would set a state nothing can finish)."""
    row = await _session_and_turn(conn, _OF_TURN, session_id, turn_id)
    if row is None:
        raise NotFound("no such session")
    task_id, state, current_generation, current, has_ended = row
    if state in TERMINAL_SESSION_STATES or current != turn_id or current_generation != generation:
        raise TurnNotCurrent("that turn is no longer the session's current turn")
    if open_turn and has_ended:
        raise TurnNotCurrent("that turn has already ended")
    return AdmittedTurn(session_id, task_id, turn_id, generation)


async def current_open_turn(conn: AsyncConnection, session_id: str) -> AdmittedTurn | None:
    """The session's current turn with its generation, if that turn is still open (a
    question may only join an open turn; :func:`require_current` re-checks it when storing)."""
    row = await _session_and_turn(conn, _OF_CURRENT_TURN, session_id)
    if row is None or row.current is None or row.ended is None or row.ended:
        return None
    return AdmittedTurn(session_id, row.task_id, row.current, row.prompt_generation)


def _session_and_turn_query(turn_id: Any) -> Any:
    """The task, state, generation and current turn of session ``session``, and whether
    ``turn_id`` (an SQL expression) has ended."""
    ended = select(turns.c.completed_at.is_not(None)).where(turns.c.id == turn_id)
    return select(
        sessions.c.task_id,
        sessions.c.state,
        sessions.c.prompt_generation,
        current_turn_id(bindparam("session")).label("current"),
        ended.scalar_subquery().label("ended"),
    ).where(sessions.c.id == bindparam("session"))


#: Of the turn ``turn`` (a callback's), and of the session's current turn; built once.
_OF_TURN = _session_and_turn_query(bindparam("turn"))
_OF_CURRENT_TURN = _session_and_turn_query(current_turn_id(bindparam("session")))


async def _session_and_turn(
    conn: AsyncConnection, query: Any, session_id: str, turn_id: str | None = None
) -> Any:
    """``query``'s row for the session (``None`` for an unknown session)."""
    return (await conn.execute(query, {"session": session_id, "turn": turn_id})).first()


_INSERT_MESSAGE = insert(messages)


async def insert_message(
    conn: AsyncConnection, turn: AdmittedTurn, author: str, content: str
) -> dict[str, Any]:
    """A plain message in an admitted turn (the user's prompt or the agent's output)."""
    row = {
        "id": new_id(),
        "session_id": turn.session_id,
        "task_id": turn.task_id,
        "turn_id": turn.turn_id,
        "type": MessageType.MESSAGE.value,
        "author": author,
        "content": content,
        "metadata": {},
        "created_at": utcnow(),
    }
    await conn.execute(_INSERT_MESSAGE, row)
    return row
