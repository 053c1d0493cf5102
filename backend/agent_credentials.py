"""Per-session agent credentials: only the agent Kandev launched for a session may speak for it.

Every agent-facing route (``/api/v1/_agent/sessions/{session_id}/...``, the MCP endpoint)
requires ``Authorization: Bearer <credential>`` where the credential is the session's own: the
session id and an HMAC of it under a key generated once per database (migration 0003,
``kandev_meta``). So the credential needs no row of its own, is the same in every backend
process and after restarts (a resumed answer reaches the agent that already holds it), and a
credential of one session is worthless for another. The backend hands it to the agent with
each prompt it dispatches (``agent_token``; docs/agent-protocol.md). Without it, anyone who can
reach the port could post a question to a user and read the user's answer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.meta import meta_row
from backend.errors import DomainError
from backend.vocabulary import MetaKey


class AgentUnauthorized(DomainError):
    """An agent call without the session's credential: 401, nothing read or written."""

    status = 401
    code = "unauthorized"


class CredentialsNotLoaded(RuntimeError):
    pass


class AgentCredentials:
    """Derives and checks the credentials; :meth:`load` reads the key at backend start."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key

    async def load(self, engine: AsyncEngine) -> None:
        row = await meta_row(engine, MetaKey.AGENT_CREDENTIAL_KEY)
        value = row[1] if row is not None else None
        if not value:
            raise CredentialsNotLoaded("agent credential key missing; run the migrations first")
        self._key = value.encode()

    def token_for(self, session_id: str) -> str:
        """``<session id>.<mac>``: it names its session (the MCP endpoint has no session in
        its path) and proves it."""
        if self._key is None:
            raise CredentialsNotLoaded("agent credentials are read at backend start")
        digest = hmac.new(self._key, b"kandev-agent\x00" + session_id.encode(), hashlib.sha256)
        mac = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
        return f"{session_id}.{mac}"

    def session_of(self, token: str | None) -> str:
        """The session ``token`` is the credential of; :class:`AgentUnauthorized` otherwise."""
        if token is None:
            raise AgentUnauthorized("agent calls need the session's credential")
        session_id, dot, _mac = token.rpartition(".")
        if not dot or not hmac.compare_digest(token.encode(), self.token_for(session_id).encode()):
            raise AgentUnauthorized("this is not a session's agent credential")
        return session_id

    def check(self, session_id: str, token: str | None) -> None:
        """Raise :class:`AgentUnauthorized` unless ``token`` is ``session_id``'s credential."""
        if self.session_of(token) != session_id:
            raise AgentUnauthorized("this credential is not the session's")
