"""The ACP executor: runs an agent process per session and speaks the Agent Client Protocol
(official ``agent-client-protocol`` SDK) over its stdio.

It is a :class:`~backend.orchestrator.dispatch.PromptDispatcher`, so the prompt reservation,
attempt marker and acknowledgement deadline apply unchanged; the ``session/prompt`` send is
the dispatch. Per session: launch the profile's command → ``initialize`` → ``session/new``
(with Kandev's MCP server and the session's credential, so the agent asks the user through
``ask_user_clarification``) or ``session/load`` after a crash → one ``session/prompt`` per
turn, sent only after the previous prompt ended (a newer turn cancels it first). Message
chunks become the turn's transcript messages (grouped by ``messageId``); the stop reason
completes the turn; a process that dies fails its turn with a message saying so.

Acknowledgement: a prompt counts as taken once it is written to a live agent's stdin; if the
process cannot be started or initialised in time, the prompt certainly was not taken
(:class:`PromptRejected`).

Test controls (the test API's ``agentctl.prompt`` fault point, applied at the dispatch
boundary): ``reject`` refuses before writing, ``timeout``
waits out the acknowledgement deadline without writing, ``accept_then_fail`` writes (the agent
runs the prompt) and then reports a transport failure. :meth:`prompts` reads the mock agent's
durable record (``KANDEV_MOCK_RECORD`` in the profile's environment).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, connect_to_agent, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationFormSessionMode,
    HttpHeader,
    HttpMcpServer,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from acp.schema import PermissionOption as AcpPermissionOption

from backend.agent_tools import DEFAULT_WAIT_S, MCP_PATH
from backend.agents.elicitation import (
    ElicitationForm,
    ElicitationResponse,
    UnsupportedForm,
    cancelled,
)
from backend.agents.lifeline import bound_to_worker
from backend.agents.profiles import MOCK, MOCK_RECORD_ENV, AgentProfile
from backend.errors import DomainError
from backend.orchestrator.dispatch import (
    AgentSink,
    PromptDispatcher,
    PromptNotAcknowledged,
    PromptRejected,
    PromptRequest,
    PromptTransportError,
)
from backend.permissions import PermissionDesk, PermissionOption

log = logging.getLogger(__name__)

#: ACP lines can carry large content (files, images): the pipe reader's line limit.
STDIO_LIMIT_BYTES = 50 * 1024 * 1024
#: How long a cancelled prompt may take to end before the next one is sent anyway.
CANCEL_GRACE_S = 5.0
STDERR_LINES = 20
#: How long a broken connection waits for the process's exit code (for the message).
EXIT_GRACE_S = 1.0
#: How long a prompt that ended waits for its native questions to detach before completing.
ASK_SETTLE_S = 10.0
#: The longest a launch may take in the background (``npx`` may download the agent first).
LAUNCH_CAP_S = 300.0
COMPLETED_STOPS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "cancelled"})
#: The test API's ``agentctl.prompt`` fault actions (the name predates ACP; QA suites use it).
FAULT_ACTIONS = frozenset({"reject", "timeout", "accept_then_fail"})


class _PromptPipe:
    """The agent's stdin as the ACP connection writes to it, noting each ``session/prompt``
    request that reached the pipe (written and drained): that is the acknowledgement."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        # The SDK insists on a real StreamWriter: hook this one's write and drain.
        self._write, self._drain = writer.write, writer.drain
        writer.write = self.write  # type: ignore[method-assign]
        writer.drain = self.drain  # type: ignore[method-assign]
        self._prompt_pending = False
        self.prompts_flushed = 0
        self._flushed = asyncio.Event()

    def write(self, data: bytes) -> None:
        self._write(data)
        if b'"session/prompt"' in data:
            self._prompt_pending = True

    async def drain(self) -> None:
        await self._drain()
        if self._prompt_pending:
            self._prompt_pending = False
            self.prompts_flushed += 1
            self._flushed.set()

    async def prompt_flushed_after(
        self, count: int, sending: asyncio.Task[None], timeout_s: float
    ) -> None:
        """Wait until more than ``count`` prompts reached the pipe; the sending task ending
        first (a broken pipe) or the deadline means the prompt was not taken."""
        async with asyncio.timeout(timeout_s):
            while self.prompts_flushed <= count:
                if sending.done():
                    raise PromptRejected("the agent's input closed before the prompt was sent")
                self._flushed.clear()
                waiter = asyncio.ensure_future(self._flushed.wait())
                try:
                    await asyncio.wait({waiter, sending}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    waiter.cancel()


@dataclass(slots=True)
class _Turn:
    request: PromptRequest
    task: asyncio.Task[None] | None = None
    chunks: list[str] = field(default_factory=list)
    message_id: str | None = None
    #: Set when the prompt ended (any way): its pending native questions detach.
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    #: The handlers of its pending ``elicitation/create`` requests.
    asks: set[asyncio.Task[Any]] = field(default_factory=set)


@dataclass(slots=True)
class _Agent:
    """One session's agent process and its ACP session."""

    session_id: str
    profile: AgentProfile
    process: asyncio.subprocess.Process
    conn: ClientSideConnection | None = None
    pipe: _PromptPipe | None = None
    acp_session_id: str = ""
    can_load: bool = False
    turn: _Turn | None = None
    stderr: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=STDERR_LINES)
    )
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    stderr_reader: asyncio.Task[None] | None = None


class AcpExecutor(PromptDispatcher):
    def __init__(
        self,
        profiles: Mapping[str, AgentProfile],
        *,
        start_timeout_s: float = 10.0,
        fault_timeout_s: float | None = None,
        elicitation_wait_s: float = DEFAULT_WAIT_S,
    ) -> None:
        #: The profiles sessions may name; each session's agent runs its own.
        self.profiles = profiles
        #: How long a prompt waits for its agent's launch (``initialize``, ``session/new``):
        #: within the acknowledgement deadline, or the prompt was not taken.
        self.start_timeout_s = start_timeout_s
        #: How long the ``timeout`` test fault withholds the acknowledgement.
        self.fault_timeout_s = start_timeout_s if fault_timeout_s is None else fault_timeout_s
        #: How long a native question (``elicitation/create``) is held before it detaches,
        #: like the MCP tool's default wait.
        self.elicitation_wait_s = elicitation_wait_s
        #: The armed test fault and how many prompts it still applies to (``None``: all).
        self._fault: tuple[str, int | None] | None = None
        self._sink: AgentSink | None = None
        #: Where agents' permission requests go; without it they are declined.
        self.permissions: PermissionDesk | None = None
        self._agents: dict[str, _Agent] = {}
        self._launches: dict[str, asyncio.Task[_Agent]] = {}
        #: ACP session ids of sessions whose process died: ``session/load`` resumes them.
        self._previous: dict[str, str] = {}

    def attach(self, sink: AgentSink) -> None:
        self._sink = sink

    def attach_permissions(self, desk: PermissionDesk) -> None:
        self.permissions = desk

    # -- dispatch ------------------------------------------------------------------------------

    async def dispatch_prompt(self, prompt: PromptRequest) -> None:
        fault = self._take_fault()
        if fault == "reject":
            raise PromptRejected("the agent refused the prompt (test fault)")
        if fault == "timeout":
            await asyncio.sleep(self.fault_timeout_s)
            raise PromptNotAcknowledged("no acknowledgement (test fault)", maybe_delivered=False)
        agent = self._agents.get(prompt.session_id)
        if agent is None or agent.process.returncode is not None:
            agent = await self._ready_agent(prompt)
        async with agent.lock:
            await self._end_running(agent)
            turn = _Turn(prompt)
            agent.turn = turn
            assert agent.pipe is not None
            flushed = agent.pipe.prompts_flushed
            turn.task = asyncio.create_task(self._run(agent, turn), name=f"acp-{prompt.turn_id}")
            # Acknowledged once the request is in the pipe (the OS holds it even if this
            # process dies now); a write that fails first means the agent never got it.
            try:
                await agent.pipe.prompt_flushed_after(flushed, turn.task, self.start_timeout_s)
            except TimeoutError as error:
                # An agent that does not read its input is stuck: ended here, it can never
                # run the prompt, so the prompt certainly was not taken (the next prompt
                # starts a new process).
                agent.process.kill()
                raise PromptNotAcknowledged(
                    "the agent did not read the prompt in time", maybe_delivered=False
                ) from error
        if fault == "accept_then_fail":
            raise PromptTransportError("the connection failed after the prompt (test fault)")

    async def _ready_agent(self, prompt: PromptRequest) -> _Agent:
        """The session's agent once launched. A launch slower than the acknowledgement
        deadline (a first ``npx`` download, say) goes on in the background: this prompt was
        not taken, and a retry finds the agent ready."""
        session_id = prompt.session_id
        launch = self._launches.get(session_id)
        if launch is None:
            launch = asyncio.create_task(self._launch(prompt), name=f"acp-launch-{session_id}")
            self._launches[session_id] = launch
            launch.add_done_callback(lambda done: self._forget_launch(session_id, done))
        try:
            async with asyncio.timeout(self.start_timeout_s):
                return await asyncio.shield(launch)
        except TimeoutError as error:
            raise PromptNotAcknowledged(
                f"the agent {prompt.agent_profile!r} is still starting; try again in a moment",
                maybe_delivered=False,
            ) from error

    def _forget_launch(self, session_id: str, launch: asyncio.Task[_Agent]) -> None:
        if self._launches.get(session_id) is launch:
            del self._launches[session_id]
        if not launch.cancelled() and launch.exception() is not None:
            log.info("agent launch for session %s failed: %r", session_id, launch.exception())

    async def _launch(self, prompt: PromptRequest) -> _Agent:
        """Start the profile's process and open an ACP session (bounded by
        :data:`LAUNCH_CAP_S`); a failure means no prompt was taken."""
        name = prompt.agent_profile
        profile = self.profiles.get(name)
        if profile is None:
            raise PromptRejected(f"there is no agent profile {name!r}")
        env = {**os.environ, **profile.env}
        try:
            process = await asyncio.create_subprocess_exec(
                *bound_to_worker(profile.command, path=env.get("PATH"), cwd=profile.cwd),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=profile.cwd,
                limit=STDIO_LIMIT_BYTES,
            )
        except OSError as error:
            raise PromptRejected(f"the agent {name!r} could not start: {error}") from error
        agent = _Agent(prompt.session_id, profile, process)
        agent.stderr_reader = asyncio.create_task(self._drain_stderr(agent))
        try:
            async with asyncio.timeout(LAUNCH_CAP_S):
                await self._open_session(agent, prompt)
        except BaseException as error:
            await asyncio.shield(self._stop_process(agent))
            if isinstance(error, TimeoutError):
                raise PromptRejected(f"the agent {name!r} did not start") from error
            if isinstance(error, RequestError | OSError | ConnectionError):
                raise PromptRejected(f"the agent {name!r} failed to start: {error}") from error
            raise
        self._agents[prompt.session_id] = agent
        return agent

    async def _open_session(self, agent: _Agent, prompt: PromptRequest) -> None:
        assert agent.process.stdin is not None and agent.process.stdout is not None
        agent.pipe = _PromptPipe(agent.process.stdin)
        agent.conn = connect_to_agent(
            _Client(self, agent),
            agent.process.stdin,
            agent.process.stdout,
            use_unstable_protocol=True,  # elicitation is still marked unstable
        )
        init = await agent.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities())
            ),
        )
        capabilities = init.agent_capabilities
        agent.can_load = bool(capabilities and capabilities.load_session)
        servers = [_kandev_mcp(prompt)]
        cwd = agent.profile.cwd or os.getcwd()
        # After a crash of the agent (in memory) or of the backend (the session's stored id),
        # the conversation goes on where the agent can load it; otherwise it starts afresh.
        previous = self._previous.get(prompt.session_id) or prompt.agent_session_id
        if previous and agent.can_load:
            try:
                await agent.conn.load_session(cwd=cwd, session_id=previous, mcp_servers=servers)
                agent.acp_session_id = previous
            except RequestError as refused:
                log.info("agent could not load session %s: %s", previous, refused)
        if not agent.acp_session_id:
            agent.acp_session_id = (
                await agent.conn.new_session(cwd=cwd, mcp_servers=servers)
            ).session_id
        self._previous[prompt.session_id] = agent.acp_session_id
        if agent.acp_session_id != prompt.agent_session_id:
            await self._remember(prompt.session_id, agent.acp_session_id)

    async def _remember(self, session_id: str, acp_session_id: str) -> None:
        """Store the agent's conversation id (best effort: without it, a backend restart
        starts the conversation afresh, nothing worse)."""
        assert self._sink is not None
        try:
            await self._sink.agent_session_opened(session_id, acp_session_id)
        except Exception:
            log.exception("agent session id of session %s not stored", session_id)

    async def _end_running(self, agent: _Agent) -> None:
        """A newer turn: cancel the running prompt and let it end before the next is sent."""
        running = agent.turn
        if running is None or running.task is None or running.task.done():
            return
        assert agent.conn is not None
        with contextlib.suppress(Exception):
            await agent.conn.cancel(session_id=agent.acp_session_id)
        done, _ = await asyncio.wait({running.task}, timeout=CANCEL_GRACE_S)
        if not done:
            running.task.cancel()

    # -- a running prompt ----------------------------------------------------------------------

    async def _run(self, agent: _Agent, turn: _Turn) -> None:
        request = turn.request
        assert agent.conn is not None
        status = "failed"
        try:
            try:
                response = await agent.conn.prompt(
                    session_id=agent.acp_session_id,
                    prompt=[text_block(_prompt_text(request))],
                    kandev=_meta(request),
                )
            finally:
                await self._prompt_ended(turn)
            await self._flush(turn)
            status = "completed" if response.stop_reason in COMPLETED_STOPS else "failed"
        except asyncio.CancelledError:
            await self._flush(turn)
            raise
        except Exception as error:
            await self._flush(turn)
            with contextlib.suppress(TimeoutError):  # a closed pipe is usually an exit
                await asyncio.wait_for(agent.process.wait(), EXIT_GRACE_S)
            await self._say(turn, self._crash_message(agent, error))
        await self._complete(turn, status)

    async def _prompt_ended(self, turn: _Turn) -> None:
        """Nobody will read answers to the prompt's pending native questions any more: they
        detach (and pause the turn) before the turn completes, like an MCP call that ended."""
        turn.ended.set()
        if turn.asks:
            await asyncio.wait(set(turn.asks), timeout=ASK_SETTLE_S)

    def _crash_message(self, agent: _Agent, error: Exception) -> str:
        code = agent.process.returncode
        tail = "\n".join(agent.stderr)
        reason = f"exited with code {code}" if code is not None else f"failed: {error!r}"
        return f"The agent process {reason}." + (f"\n{tail}" if tail else "")

    async def on_update(self, agent: _Agent, update: Any) -> None:
        """A ``session/update``: message chunks gather into the turn's current message (a new
        ``messageId`` or any other update ends it)."""
        turn = agent.turn
        if turn is None:
            return
        if not isinstance(update, AgentMessageChunk):
            await self._flush(turn)
            return
        text = getattr(update.content, "text", None)
        if text is None:
            return
        if turn.chunks and update.message_id != turn.message_id:
            await self._flush(turn)
        turn.message_id = update.message_id
        turn.chunks.append(text)

    async def _flush(self, turn: _Turn) -> None:
        if turn.chunks:
            text, turn.chunks = "".join(turn.chunks), []
            await self._say(turn, text)

    async def _say(self, turn: _Turn, text: str) -> None:
        request = turn.request
        assert self._sink is not None
        try:
            await self._sink.agent_message(
                request.session_id, request.turn_id, request.prompt_generation, text
            )
        except DomainError as refused:  # e.g. the turn is no longer current
            log.info("agent output for turn %s refused: %s", request.turn_id, refused.message)
        except Exception:
            # A lost transcript line must not also lose the turn's completion: go on.
            log.exception("agent output for turn %s not stored", request.turn_id)

    async def _complete(self, turn: _Turn, status: str) -> None:
        request = turn.request
        assert self._sink is not None
        try:
            await self._sink.turn_complete(
                request.session_id, request.turn_id, request.prompt_generation, status
            )
        except DomainError as refused:
            log.info("completion of turn %s refused: %s", request.turn_id, refused.message)
        except Exception:
            # Left open, like a lost ready event: start-up recovery settles the turn.
            log.exception("completion of turn %s not stored", request.turn_id)

    # -- native questions ------------------------------------------------------------------

    async def elicit(self, agent: _Agent, message: str, mode: Any) -> ElicitationResponse:
        """An ``elicitation/create`` from the agent: one bundle in its running turn, held as
        the live waiter until the answer, a Skip, :attr:`elicitation_wait_s`, or the end of
        the prompt that asked (then it detaches; the answer comes as the next prompt)."""
        if not isinstance(mode, ElicitationFormSessionMode):
            raise RequestError.invalid_params({"details": "Kandev answers session forms only"})
        turn = agent.turn
        if mode.session_id != agent.acp_session_id or turn is None or turn.ended.is_set():
            return cancelled("cancelled", message="no prompt of this session is running")
        handler = asyncio.current_task()
        assert handler is not None
        # Registered before any await, so the prompt's end waits for this question.
        turn.asks.add(handler)
        try:
            try:
                form = ElicitationForm.from_schema(message, mode.requested_schema)
            except UnsupportedForm as error:
                raise RequestError.invalid_params({"details": str(error)}) from None
            await self._flush(turn)  # what the agent said first stays first
            if form.lead:
                await self._say(turn, form.lead)
            request = turn.request
            assert self._sink is not None
            gone = asyncio.ensure_future(turn.ended.wait())
            try:
                result = await self._sink.agent_clarification(
                    request.session_id,
                    request.turn_id,
                    request.prompt_generation,
                    form.questions,
                    self.elicitation_wait_s,
                    gone,
                )
            except DomainError as refused:  # e.g. the turn is no longer current
                return cancelled("refused", message=refused.message)
            finally:
                gone.cancel()
            return form.response(result)
        finally:
            turn.asks.discard(handler)

    # -- test controls ---------------------------------------------------------------------------

    async def set_failpoint(self, action: str, count: int | None = None) -> None:
        if action not in FAULT_ACTIONS:
            raise ValueError(f"unknown agent fault {action!r}")
        self._fault = (action, count)

    async def clear_failpoint(self) -> None:
        self._fault = None

    def _take_fault(self) -> str | None:
        if self._fault is None:
            return None
        action, count = self._fault
        if count is not None:
            self._fault = (action, count - 1) if count > 1 else None
        return action

    def process_of(self, session_id: str) -> asyncio.subprocess.Process | None:
        """The session's agent process, if one runs (tests end it to play a crash)."""
        agent = self._agents.get(session_id)
        return agent.process if agent is not None else None

    async def prompts(self) -> list[dict[str, Any]]:
        """The mock agent's durable record of every prompt it read, oldest first."""
        mock = self.profiles.get(MOCK)
        path = mock.env.get(MOCK_RECORD_ENV) if mock is not None else None
        if not path:
            return []
        text = await asyncio.to_thread(_read_if_exists, Path(path))
        return [entry for line in text.splitlines() if (entry := _record_entry(line))]

    # -- processes -----------------------------------------------------------------------------

    async def _drain_stderr(self, agent: _Agent) -> None:
        stream = agent.process.stderr
        assert stream is not None
        while line := await stream.readline():
            agent.stderr.append(line.decode(errors="replace").rstrip())

    async def _stop_process(self, agent: _Agent) -> None:
        if agent.process.returncode is None:
            agent.process.terminate()
            try:
                await asyncio.wait_for(agent.process.wait(), 3)
            except TimeoutError:
                agent.process.kill()
                await agent.process.wait()
        # The connection's reader and sender tasks end with it (not left pending at exit).
        if agent.conn is not None:
            with contextlib.suppress(Exception):
                await agent.conn.close()
        if agent.stderr_reader is not None:
            agent.stderr_reader.cancel()

    async def aclose(self) -> None:
        """Stop every agent (their running turns end without completing here: start-up
        recovery owns turns a stopped backend left open)."""
        for launch in list(self._launches.values()):
            launch.cancel()
        agents, self._agents = list(self._agents.values()), {}
        for agent in agents:
            if agent.turn is not None and agent.turn.task is not None:
                agent.turn.task.cancel()
        await asyncio.gather(*(self._stop_process(a) for a in agents), return_exceptions=True)


class _Client:
    """The client side of one agent's connection."""

    def __init__(self, executor: AcpExecutor, agent: _Agent) -> None:
        self._executor = executor
        self._agent = agent

    def on_connect(self, conn: Any) -> None:
        pass

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        await self._executor.on_update(self._agent, update)

    async def request_permission(
        self,
        options: list[AcpPermissionOption],
        session_id: str,
        tool_call: ToolCallUpdate,
        **_: Any,
    ) -> RequestPermissionResponse:
        """The agent asks before a tool call: the user answers through the permission desk,
        in the agent's running turn (the desk refuses a turn that is no longer current). No
        desk, no running turn, another ACP session, or no answer: declined (``cancelled``)."""
        turn, desk = self._agent.turn, self._executor.permissions
        chosen = None
        if turn is not None and desk is not None and session_id == self._agent.acp_session_id:
            await self._executor._flush(turn)  # what the agent said first stays first
            request = turn.request
            chosen = await desk.ask(
                request.session_id,
                request.turn_id,
                request.prompt_generation,
                tool_call.title or "",
                [PermissionOption(o.option_id, o.name, o.kind) for o in options],
            )
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(option_id=chosen, outcome="selected")
        )

    async def create_elicitation(self, message: str, mode: Any, **_: Any) -> ElicitationResponse:
        return await self._executor.elicit(self._agent, message, mode)

    def __getattr__(self, name: str) -> Any:
        async def unsupported(*_: Any, **__: Any) -> Any:
            raise RequestError.method_not_found(name)

        return unsupported


def _read_if_exists(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _record_entry(line: str) -> dict[str, Any] | None:
    """One record line; a torn one (the agent killed mid-write) is no entry."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def _kandev_mcp(prompt: PromptRequest) -> HttpMcpServer:
    return HttpMcpServer(
        type="http",
        name="kandev",
        url=prompt.callback_url.rstrip("/") + MCP_PATH + "/",
        headers=[HttpHeader(name="Authorization", value=f"Bearer {prompt.agent_token}")],
    )


def _prompt_text(request: PromptRequest) -> str:
    answer = request.answer
    if answer is None:
        return request.content
    if answer.get("rejected"):
        return "The user skipped your question. Continue without that answer."
    lines = ["The user answered your question:"]
    for item in answer.get("answers") or []:
        values = [*item.get("option_labels", []), *([item["text"]] if item.get("text") else [])]
        lines.append(f"- {item.get('question', '')}: {', '.join(values)}")
    return "\n".join(lines)


def _meta(request: PromptRequest) -> dict[str, Any]:
    meta: dict[str, Any] = {"session_id": request.session_id, "turn_id": request.turn_id}
    if request.answer is not None:
        meta["answer"] = request.answer
    return meta
