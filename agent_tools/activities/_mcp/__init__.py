"""MCP client side: connections to the configured servers and discovery of their tools."""

from agent_tools.activities._mcp.client import McpConnections, McpUnavailable
from agent_tools.activities._mcp.discovery import mcp_user_tools

__all__ = ["McpConnections", "McpUnavailable", "mcp_user_tools"]
