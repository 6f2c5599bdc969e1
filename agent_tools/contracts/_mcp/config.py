"""Which MCP servers a deployment attaches, and how to reach them.

Two transports, as the MCP specification defines them: **stdio** (``command`` + ``args``: the worker starts
the server as a subprocess and talks JSON-RPC over its stdin/stdout) and **streamable HTTP** (``url``).
The file format is the one MCP clients share (``mcpServers``), so an existing configuration can be reused::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"]},
        "issues": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ..."}}
    }}

A stdio server gets only the environment variables in its ``env`` plus the MCP SDK's small safe default set
(PATH, HOME, ...): the worker's own secrets are not handed to third-party servers.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator

from agent_tools._catalog.spec import ToolLevel
from agent_tools._errors import ConfigurationError

SERVER_NAME_PATTERN = r"^[A-Za-z0-9_\-]{1,32}$"


class McpServerConfig(BaseModel):
    """One MCP server.

    Attributes:
        name: Short name; tools appear as ``mcp__<name>__<tool>``.
        command: Executable of a stdio server.
        args: Its arguments.
        env: Extra environment variables for a stdio server.
        cwd: Working directory of a stdio server.
        url: Endpoint of a streamable-HTTP server.
        headers: HTTP headers (authorisation) for a streamable-HTTP server.
        tools: Only these of the server's tools (by the server's own names); None: all.
        exclude_tools: Never these.
        timeout_seconds: Limit for connecting and for each call.
        level: Tool level an agent needs for this server's tools (codai: any level but ``none``).
    """

    name: str = Field(pattern=SERVER_NAME_PATTERN)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    tools: list[str] | None = None
    exclude_tools: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(default=60.0, gt=0, le=600)
    level: ToolLevel = ToolLevel.l1_http

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r}: give exactly one of 'command' (stdio) or 'url' (HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"MCP server {self.name!r}: url must be http(s)")
        return self

    @property
    def transport(self) -> str:
        """``stdio`` for a command, ``streamable-http`` for a URL."""
        return "stdio" if self.command is not None else "streamable-http"

    def wants(self, tool: str) -> bool:
        """True when the server's ``tools`` and ``exclude_tools`` let ``tool`` through."""
        return (self.tools is None or tool in self.tools) and tool not in self.exclude_tools


class McpConfig(BaseModel):
    """Every MCP server of the deployment."""

    servers: list[McpServerConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> McpConfig:
        names = [s.name for s in self.servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"MCP server names must be unique: {dupes}")
        return self

    @classmethod
    def parse(cls, data: dict[str, Any]) -> McpConfig:
        """From ``{"servers": [...]}`` or the shared ``{"mcpServers": {name: {...}}}`` form."""
        try:
            if "mcpServers" in data:
                servers = [{"name": name, **spec} for name, spec in (data["mcpServers"] or {}).items()]
                return cls(servers=servers)
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid MCP configuration: {exc}") from exc

    @classmethod
    def from_file(cls, path: str | Path | None) -> McpConfig:
        """From a JSON or TOML file; a missing path means no servers."""
        if path is None or not Path(path).is_file():
            return cls()
        text = Path(path).read_text()
        try:
            data = tomllib.loads(text) if str(path).endswith(".toml") else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise ConfigurationError(f"{path}: {exc}") from exc
        return cls.parse(data)
