"""Domain errors with the HTTP status and error code the API contract gives them."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """An expected refusal: mapped to ``{"error": code, "message": ...}`` with ``status``."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


class UnknownAgentProfile(DomainError):
    """A session named an agent profile this server does not have: a validation error of
    the request body like any other (400 ``validation``)."""

    code = "validation"


class NotFound(DomainError):
    status = 404
    code = "not_found"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class SessionBusy(Conflict):
    code = "session_busy"


class SessionTerminal(Conflict):
    code = "session_terminal"


class TurnNotCurrent(Conflict):
    code = "turn_not_current"


class AgentUnavailable(DomainError):
    """The agent executor refused or did not acknowledge a prompt."""

    status = 502
    code = "agent_unavailable"


class NotActive(Conflict):
    """A response to a bundle that is not operational: nothing was written or resumed."""

    code = "not_active"


class DeliveryFailed(DomainError):
    """The response could not be delivered. ``retryable`` tells the client whether the
    question is pending again (send the same answer) or the agent may already have it."""

    status = 500
    code = "delivery_failed"


class ConvergenceFailed(DeliveryFailed):
    """The response was restored durably (safe to retry), but publishing it or acknowledging
    the task summary failed, so some clients may still show the terminal snapshot."""

    code = "convergence_failed"


class ServerBusy(DomainError):
    """The server could not take the request in time (its database is saturated); whatever it
    had started is undone, so the same request may be sent again (``retryable``)."""

    status = 503
    code = "busy"


class ReservationUnresolved(DomainError):
    """A ready event waited for an overlapping successor reservation that did not resolve in
    time (e.g. its rollback failed, S29): nothing was changed; the agent may send it again."""

    status = 503
    code = "reservation_unresolved"
