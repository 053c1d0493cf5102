"""The small vocabularies stored in the schema (states, message types, statuses)."""

from __future__ import annotations

from enum import StrEnum


class SessionState(StrEnum):
    CREATED = "CREATED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    IDLE = "IDLE"
    WAITING_FOR_INPUT = "WAITING_FOR_INPUT"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL_SESSION_STATES: frozenset[SessionState] = frozenset(
    {SessionState.COMPLETED, SessionState.FAILED, SessionState.CANCELLED}
)


class MessageType(StrEnum):
    MESSAGE = "message"
    CLARIFICATION_REQUEST = "clarification_request"
    PERMISSION_REQUEST = "permission_request"
    STATUS = "status"


class RequestStatus(StrEnum):
    """``metadata.status`` of clarification and permission rows."""

    PENDING = "pending"
    ANSWERED = "answered"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class PendingAction(StrEnum):
    CLARIFICATION = "clarification"
    PERMISSION = "permission"


class MetaKey(StrEnum):
    PROJECTION_EPOCH = "projection_epoch"
    AGENT_CREDENTIAL_KEY = "agent_credential_key"
    #: Names this database on shared infrastructure (the NATS subjects of its workers).
    INSTANCE_ID = "instance_id"


class TurnMarker(StrEnum):
    """Turn metadata flags of unfinished durable work: start-up recovery (and, with several
    workers, the sweep) looks for each, through a partial index on each (migration 0006)."""

    #: A successor reservation not yet published (``orchestrator/reservations.py``).
    DISPATCH_PENDING = "prompt_dispatch_pending"
    #: An ordinary turn whose prompt the agent has not acknowledged (``admission.py``).
    DISPATCH_UNACKNOWLEDGED = "dispatch_unacknowledged"
    #: The start-event outbox: events to (re)publish (``recovery.py``).
    START_EVENT_PENDING = "start_event_pending"
