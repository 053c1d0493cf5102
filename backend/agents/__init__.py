"""Real agents: processes speaking the Agent Client Protocol (ACP), launched per session from
an agent profile (``profiles.py``) and driven by ``acp_executor.py``; ``mock_acp.py`` is the
project's own ACP agent, executing the mock scripts through ACP and Kandev's MCP tool."""
