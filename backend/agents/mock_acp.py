"""The mock agent as a real ACP agent (``python -m backend.agents.mock_acp``, stdio).

It runs the mock scripts of docs/agent-protocol.md the way a coding agent would: replies are
``session/update`` message chunks (one ``messageId`` per reply), questions go to the MCP
server Kandev names in ``session/new`` (``ask_user_clarification``, with the headers given
there; with ``/elicit``, natively with ``elicitation/create`` when the client offers form
elicitation), ``/fail`` ends the turn with ``refusal``, and ``/permit`` reports a tool call, asks
the client's permission for it (``session/request_permission``) and then says
``Permission: <option>`` (or ``Permission cancelled.``). A prompt that resumes a detached
question carries the answer in ``_meta.kandev.answer``; the agent replies ``Got: ...`` (or
``Skipped.``) and ends the turn. Every prompt is appended to ``KANDEV_MOCK_RECORD`` (JSON
lines) when set, so tests can count dispatches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    run_agent,
    start_tool_call,
    text_block,
    update_agent_message,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import (
    AcceptElicitationResponse,
    AgentCapabilities,
    AllowedOutcome,
    CancelElicitationResponse,
    DeclineElicitationResponse,
    ElicitationFormSessionMode,
    ElicitationMultiSelectPropertySchema,
    ElicitationSchema,
    ElicitationStringPropertySchema,
    EnumOption,
    HttpMcpServer,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    TitledMultiSelectItems,
    ToolCallUpdate,
)
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from backend.agents.mock_script import (
    DEFAULT_WAIT_S,
    PERMIT_DECLINED,
    Ask,
    Fail,
    Permit,
    Question,
    Reply,
    Sleep,
    answer_reply,
    format_answers,
    parse_script,
    questions_payload,
)
from backend.agents.profiles import MOCK_RECORD_ENV
from backend.clock import utcnow

log = logging.getLogger(__name__)

WAIT_ENV = "KANDEV_CLARIFICATION_WAIT_S"
CLARIFICATION_TOOL = "ask_user_clarification"


class MockAcpAgent:
    """One agent process: any number of ACP sessions, one prompt at a time each."""

    def __init__(self, record_path: str | None, default_wait_s: float) -> None:
        self._conn: Client | None = None
        self._record_path = record_path
        self._default_wait_s = default_wait_s
        self._mcp: dict[str, HttpMcpServer] = {}
        #: Whether the client answers form elicitations (``initialize``).
        self._can_elicit = False

    def on_connect(self, conn: Client) -> None:
        self._conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, **_: Any
    ) -> InitializeResponse:
        elicitation = getattr(client_capabilities, "elicitation", None)
        self._can_elicit = getattr(elicitation, "form", None) is not None
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=True),
        )

    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self._remember_mcp(session_id, mcp_servers)
        return NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> LoadSessionResponse:
        self._remember_mcp(session_id, mcp_servers)
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **_: Any) -> None:
        """Cancellation ends the running prompt (its task is cancelled by the connection)."""

    async def prompt(self, prompt: list[Any], session_id: str, **meta: Any) -> PromptResponse:
        text = "\n".join(getattr(block, "text", "") for block in prompt)
        kandev = meta.get("kandev") if isinstance(meta.get("kandev"), dict) else {}
        self._record(kandev, text, session_id)
        answer = kandev.get("answer")
        if isinstance(answer, dict):
            await self._say(session_id, answer_reply(answer))
            return PromptResponse(stop_reason="end_turn")
        for step in parse_script(text, self._default_wait_s):
            if isinstance(step, Reply):
                await self._say(session_id, step.text)
            elif isinstance(step, Sleep):
                await asyncio.sleep(step.ms / 1000)
            elif isinstance(step, Fail):
                return PromptResponse(stop_reason="refusal")
            elif isinstance(step, Permit):
                await self._say(session_id, await self._permit(session_id, step))
            elif isinstance(step, Ask):
                outcome = await self._ask(session_id, step)
                kind = outcome.get("outcome")
                if kind == "answered":
                    await self._say(session_id, format_answers(outcome.get("answers")))
                elif kind == "rejected":
                    await self._say(session_id, "Skipped.")
                elif kind in ("detached", "cancelled", "expired"):
                    break  # the turn ends here (a detached answer comes as the next prompt)
                else:
                    # The tool call failed: the answer may or may not have been given. Like
                    # an agent stuck on a broken tool, it stays in the turn without a word;
                    # Kandev's watchdog re-sends a confirmed answer as the next prompt, which
                    # cancels this one.
                    await asyncio.Event().wait()
        return PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        assert self._conn is not None
        chunk = update_agent_message(text_block(text))
        chunk.message_id = uuid.uuid4().hex
        await self._conn.session_update(session_id=session_id, update=chunk)

    async def _ask(self, session_id: str, ask: Ask) -> dict[str, Any]:
        server = self._mcp.get(session_id)
        if ask.native:
            if not self._can_elicit:
                log.warning("the client does not answer elicitations")
                return {"outcome": "error"}
        elif server is None:
            log.warning("session %s has no MCP server to ask through", session_id)
            return {"outcome": "error"}
        # Like a coding agent, report the tool call first: the client shows what was said
        # before the question, then the question.
        assert self._conn is not None
        call_id = uuid.uuid4().hex
        await self._conn.session_update(
            session_id=session_id,
            update=start_tool_call(call_id, "Ask the user", kind="other", status="in_progress"),
        )
        try:
            if ask.native:
                return await self._elicit(session_id, call_id, ask)
            assert server is not None
            return await self._call_tool(server, ask)
        finally:
            await self._conn.session_update(
                session_id=session_id, update=update_tool_call(call_id, status="completed")
            )

    async def _elicit(self, session_id: str, call_id: str, ask: Ask) -> dict[str, Any]:
        """Ask with ``elicitation/create`` and wait up to the bundle's wait; then stop
        waiting (``detached``: the turn ends, the answer comes as the next prompt)."""
        assert self._conn is not None
        fields = {f"q{i}": _form_property(q) for i, q in enumerate(ask.questions, 1)}
        single = len(ask.questions) == 1
        message = ask.questions[0].question if single else "A few questions before I go on."
        mode = ElicitationFormSessionMode(
            session_id=session_id,
            tool_call_id=call_id,
            requested_schema=ElicitationSchema(properties=fields, required=list(fields)),
        )
        asking = asyncio.ensure_future(self._conn.create_elicitation(message, mode))
        # One notification behind the request (the connection sends in order): once it is
        # out, so is the question, however short the wait.
        await asyncio.sleep(0)
        await self._conn.session_update(
            session_id=session_id, update=update_tool_call(call_id, status="in_progress")
        )
        done, _ = await asyncio.wait({asking}, timeout=ask.wait_seconds)
        if not done:
            asking.cancel()
            return {"outcome": "detached"}
        try:
            response = asking.result()
        except Exception as error:
            log.warning("elicitation failed: %r", error)
            return {"outcome": "error"}
        if isinstance(response, AcceptElicitationResponse):
            return {"outcome": "answered", "answers": _form_answers(ask, response.content or {})}
        if isinstance(response, DeclineElicitationResponse):
            return {"outcome": "rejected"}
        if isinstance(response, CancelElicitationResponse):
            kandev = (response.field_meta or {}).get("kandev") or {}
            return {"outcome": kandev.get("outcome", "cancelled")}
        return {"outcome": "error"}

    async def _permit(self, session_id: str, permit: Permit) -> str:
        """Report the tool call, ask the client's permission for it, and say what came back
        (a refused or failed request counts as not granted)."""
        assert self._conn is not None
        call_id = uuid.uuid4().hex
        await self._conn.session_update(
            session_id=session_id,
            update=start_tool_call(call_id, permit.title, kind="execute", status="pending"),
        )
        options = [
            PermissionOption(
                option_id=f"o{i}", name=label, kind="allow_once" if i == 1 else "reject_once"
            )
            for i, label in enumerate(permit.options, 1)
        ]
        try:
            response = await self._conn.request_permission(
                session_id=session_id,
                tool_call=ToolCallUpdate(tool_call_id=call_id, title=permit.title),
                options=options,
            )
            outcome = response.outcome
        except Exception as error:
            log.warning("permission request failed: %r", error)
            outcome = None
        chosen = next(
            (
                o
                for o in options
                if isinstance(outcome, AllowedOutcome) and o.option_id == outcome.option_id
            ),
            None,
        )
        granted = chosen is not None and chosen.kind == "allow_once"
        await self._conn.session_update(
            session_id=session_id,
            update=update_tool_call(call_id, status="completed" if granted else "failed"),
        )
        return f"Permission: {chosen.name}" if chosen is not None else PERMIT_DECLINED

    async def _call_tool(self, server: HttpMcpServer, ask: Ask) -> dict[str, Any]:
        headers = {h.name: h.value for h in server.headers}
        arguments = {
            "questions": questions_payload(ask),
            "wait_seconds": ask.wait_seconds,
        }
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(server.url, http_client=http) as (read, write),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            result = await mcp.call_tool(CLARIFICATION_TOOL, arguments)
        if result.is_error or not isinstance(result.structured_content, dict):
            return {"outcome": "error"}
        return result.structured_content

    def _remember_mcp(self, session_id: str, servers: list[Any] | None) -> None:
        for server in servers or []:
            if isinstance(server, HttpMcpServer):
                self._mcp[session_id] = server

    def _record(self, kandev: dict[str, Any], content: str, acp_session_id: str) -> None:
        if not self._record_path:
            return
        line = {
            "session_id": kandev.get("session_id", ""),
            "turn_id": kandev.get("turn_id", ""),
            "content": content,
            "accepted_at": utcnow().isoformat(),
            "acp_session_id": acp_session_id,
            # Which agent process read it: one session's prompts must reach one agent.
            "agent_pid": os.getpid(),
        }
        with open(self._record_path, "a", encoding="utf-8") as record:
            record.write(json.dumps(line) + "\n")


def _form_property(question: Question) -> Any:
    """A question as a form property: several picks (titled options), one pick (plain enum),
    or free text."""
    if question.options and question.multi_select:
        options = [EnumOption(const=f"v{i}", title=o) for i, o in enumerate(question.options, 1)]
        return ElicitationMultiSelectPropertySchema(
            type="array", title=question.question, items=TitledMultiSelectItems(any_of=options)
        )
    if question.options:
        return ElicitationStringPropertySchema(
            type="string", title=question.question, enum=list(question.options)
        )
    return ElicitationStringPropertySchema(type="string", title=question.question)


def _form_answers(ask: Ask, content: dict[str, Any]) -> list[dict[str, Any]]:
    """The accepted content as the answers list ``format_answers`` reads."""
    answers = []
    for i, question in enumerate(ask.questions, 1):
        value = content.get(f"q{i}")
        if value is None:
            continue
        if isinstance(value, list):
            by_value = {f"v{j}": o for j, o in enumerate(question.options, 1)}
            labels = [by_value.get(str(v), str(v)) for v in value]
            answers.append({"question": question.question, "option_labels": labels, "text": ""})
        elif question.options and value in question.options:
            answers.append({"question": question.question, "option_labels": [value], "text": ""})
        else:
            answers.append({"question": question.question, "option_labels": [], "text": value})
    return answers


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    wait = float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_S))
    asyncio.run(run_agent(MockAcpAgent(os.environ.get(MOCK_RECORD_ENV), wait)))


if __name__ == "__main__":
    main()
