"""HTTP client for agentctl: prompt dispatch with a bounded acknowledgement wait.

``dispatch_prompt`` returns only on 202. Every other outcome raises one of the exceptions in
``backend.agentctl.errors``, chosen so the caller can tell a safe rollback (``PromptRejected``,
or ``PromptNotAcknowledged`` with ``maybe_delivered=False``) from the ambiguous cases where the
agent may be running the prompt.

Each prompt travels on a fresh connection (no keep-alive pool). A reused idle connection can be
closed by the server just as the request goes out, which would turn a harmless race into a
spurious "maybe delivered"; with a fresh connection a connect failure proves non-delivery.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Any, Self

import httpx

from backend.agentctl.errors import (
    AgentctlUnavailable,
    PromptNotAcknowledged,
    PromptRejected,
    PromptTransportError,
)
from backend.agentctl.protocol import FAILPOINT_PATH, HEALTH_PATH, PROMPTS_PATH

DEFAULT_ACK_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class PromptRequest:
    """The body of ``POST /v1/prompts``; ``agent_token`` is the session's credential for the
    callbacks, ``answer`` is set when resuming a detached bundle."""

    session_id: str
    turn_id: str
    prompt_generation: int
    content: str
    callback_url: str
    agent_token: str
    answer: dict[str, Any] | None = None
    #: The session's agent profile: which agent runs the prompt.
    agent_profile: str = "mock"
    #: The agent's own id for the conversation (ACP ``sessionId``), once it has one.
    agent_session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        body = asdict(self)
        if self.answer is None:
            del body["answer"]
        # Which agent runs it is the executor's business, not the wire body's.
        del body["agent_profile"], body["agent_session_id"]
        return body


class _SendTracker:
    """Notes whether the request headers started to go out (httpcore trace extension).

    Once they did, the server may have the request: a later failure is ambiguous.
    """

    def __init__(self) -> None:
        self.sent = False

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event.endswith(".send_request_headers.started"):
            self.sent = True


class AgentctlClient:
    """Talks to one agentctl service at ``base_url``.

    ``ack_timeout_s`` bounds the whole prompt dispatch (connect, send, wait for the 202): the
    spec requires acceptance to be decided before a deadline (S34).
    """

    def __init__(
        self,
        base_url: str,
        ack_timeout_s: float = DEFAULT_ACK_TIMEOUT_S,
        *,
        request_timeout_s: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if ack_timeout_s <= 0:
            raise ValueError("ack_timeout_s must be positive")
        self.base_url = base_url.rstrip("/")
        self.ack_timeout_s = ack_timeout_s
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=request_timeout_s,
            limits=httpx.Limits(max_keepalive_connections=0),
            transport=transport,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:
        """Send a prompt and wait (bounded) for the agent's 202 acknowledgement.

        Raises ``PromptRejected`` (409: safe to roll back), ``PromptNotAcknowledged`` (deadline
        passed or no connection; ``maybe_delivered`` tells whether the agent may have it) or
        ``PromptTransportError`` (sent, then the exchange broke: the agent may run it). Never
        retries by itself: a retry after an ambiguous failure could run the prompt twice.
        """
        tracker = _SendTracker()
        try:
            async with asyncio.timeout(self.ack_timeout_s):
                response = await self._http.post(
                    PROMPTS_PATH,
                    json=prompt.to_json(),
                    timeout=self.ack_timeout_s,
                    extensions={"trace": tracker},
                )
        except (TimeoutError, httpx.TimeoutException) as exc:
            sent = tracker.sent and not isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout)
            raise PromptNotAcknowledged(
                f"agent did not acknowledge the prompt within {self.ack_timeout_s:g}s",
                maybe_delivered=sent,
            ) from None
        except httpx.ConnectError as exc:
            raise PromptNotAcknowledged(
                f"could not connect to the agent: {_describe(exc)}", maybe_delivered=False
            ) from None
        except httpx.TransportError as exc:
            if not tracker.sent:
                raise PromptNotAcknowledged(
                    f"prompt not sent: {_describe(exc)}", maybe_delivered=False
                ) from None
            raise PromptTransportError(
                f"connection to the agent failed after sending: {_describe(exc)}"
            ) from None
        _check_acknowledgement(response)

    async def prompts(self) -> list[dict[str, Any]]:
        """Every prompt the agent ever accepted (its durable record), oldest first."""
        body = await self._call("GET", PROMPTS_PATH, expect=200)
        prompts = body.get("prompts") if isinstance(body, dict) else None
        if not isinstance(prompts, list):
            raise AgentctlUnavailable("malformed prompt record from the agent")
        return prompts

    async def set_failpoint(self, action: str, count: int | None = None) -> None:
        """Arm the mock agent's ``agentctl.prompt`` failpoint (tests only)."""
        body: dict[str, Any] = {"action": action}
        if count is not None:
            body["count"] = count
        await self._call("PUT", FAILPOINT_PATH, expect=204, json=body)

    async def clear_failpoint(self) -> None:
        await self._call("DELETE", FAILPOINT_PATH, expect=204)

    async def health(self) -> bool:
        """True when the agent answers its health check; never raises (used for polling)."""
        try:
            response = await self._http.get(HEALTH_PATH)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def _call(
        self, method: str, path: str, *, expect: int, json: dict[str, Any] | None = None
    ) -> Any:
        """Side-effect-free or idempotent calls: every failure is one ``AgentctlUnavailable``."""
        try:
            response = await self._http.request(method, path, json=json)
        except httpx.HTTPError as exc:
            raise AgentctlUnavailable(f"{method} {path} failed: {_describe(exc)}") from None
        if response.status_code != expect:
            raise AgentctlUnavailable(f"{method} {path} answered {response.status_code}")
        if expect == 204:
            return None
        try:
            return response.json()
        except ValueError:
            raise AgentctlUnavailable(f"{method} {path} answered malformed JSON") from None


def _check_acknowledgement(response: httpx.Response) -> None:
    """202 ``{"accepted": true}`` is the only acknowledgement; 409 the only refusal.

    Anything else (5xx, unexpected codes, malformed bodies) comes from a server that read the
    request, so it may have recorded the prompt: ambiguous, reported as a transport error.
    """
    status = response.status_code
    if status == 409:
        raise PromptRejected()
    if status != 202:
        raise PromptTransportError(f"agent answered {status} to a prompt", status_code=status)
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or body.get("accepted") is not True:
        raise PromptTransportError("agent answered 202 with a malformed body", status_code=status)


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
