"""MCP servers as tool sources: configuration and naming (pure). The client lives in :mod:`agent_tools.activities._mcp`."""

from agent_tools.contracts._mcp.config import McpConfig, McpServerConfig
from agent_tools.contracts._mcp.naming import catalog_tool_name

__all__ = ["McpConfig", "McpServerConfig", "catalog_tool_name"]
