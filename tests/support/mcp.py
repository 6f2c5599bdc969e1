"""The MCP server of ``tests/fixtures/mcp_server.py`` as a session's tool server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agent_tools.contracts._mcp import McpServerConfig

SERVER = Path(__file__).parents[1] / "fixtures" / "mcp_server.py"


def fixture_server(**overrides: Any) -> McpServerConfig:
    return McpServerConfig(name="fixture", command=sys.executable, args=[str(SERVER)], timeout_seconds=30, **overrides)
