"""An agent's side of Kandev's MCP endpoint, with the official MCP client (streamable HTTP)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from backend.agent_tools import MCP_PATH, TOOL_NAME


@contextlib.asynccontextmanager
async def mcp_session(base_url: str, credential: str) -> AsyncIterator[ClientSession]:
    """An initialised MCP session on Kandev's endpoint, sending ``credential``."""
    headers = {"Authorization": f"Bearer {credential}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{base_url}{MCP_PATH}/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def ask(session: ClientSession, *questions: tuple[str, list[str]], wait: float) -> Any:
    """Call the clarification tool; the tool's result (``structured_content`` / errors)."""
    return await session.call_tool(
        TOOL_NAME,
        {
            "questions": [{"question": q, "options": options} for q, options in questions],
            "wait_seconds": wait,
        },
    )
