"""Talking to MCP servers with the official Python SDK (``mcp``): connections, tool listing, calls.

A worker keeps **one open session per server** (:class:`McpConnections`, ``Services.mcp``): starting
a stdio server costs a process start and a handshake (a second or more for a Python server), far too much to
pay on every tool call. The SDK's client is built on anyio task groups, which must be exited by the task that
entered them, so each connection is owned by a background task that enters the client, signals ready, and
waits to be closed; tool activities call through it from their own tasks.

A connection found dead before a call is reopened once. A call that breaks mid-way is not repeated here
(the server may have acted on it): the activity fails and Temporal's retry policy decides, on a fresh
connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

from agent_tools._errors import AgentToolsError, ConfigurationError
from agent_tools.contracts._mcp.config import McpServerConfig

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult, Tool

log = logging.getLogger(__name__)

_CLOSE_TIMEOUT_SECONDS = 5.0


class McpUnavailable(AgentToolsError):
    """A server could not be reached or its session could not be opened."""


def make_client(server: McpServerConfig) -> Client:
    """An SDK client (not yet entered) for one configured server."""
    try:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import get_default_environment
    except ModuleNotFoundError as exc:  # pragma: no cover - the package is a dependency
        raise ConfigurationError("MCP servers are configured but the 'mcp' package is not installed") from exc
    if server.command is not None:
        params = StdioServerParameters(
            command=server.command,
            args=server.args,
            # The SDK's safe defaults (PATH, HOME, ...) plus the configured ones; never the worker's secrets.
            env={**get_default_environment(), **server.env},
            cwd=server.cwd,
        )
        return Client(params, read_timeout_seconds=server.timeout_seconds)
    assert server.url is not None
    if not server.headers:
        return Client(server.url, read_timeout_seconds=server.timeout_seconds)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=server.headers, timeout=server.timeout_seconds)
    return Client(streamable_http_client(server.url, http_client=http), read_timeout_seconds=server.timeout_seconds)


async def list_all_tools(client: Client, *, max_pages: int = 50) -> list[Tool]:
    """Every tool of a server, following pagination (bounded: a server that pages forever cannot hang us)."""
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(max_pages):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def is_protocol_error(exc: BaseException) -> bool:
    """An error answer from a live server (unknown tool, invalid params), as opposed to a lost connection."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


class McpConnection:
    """One open session with one server, owned by a background task."""

    def __init__(self, server: McpServerConfig) -> None:
        self.server = server
        self.client: Client | None = None
        self.error: BaseException | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self._task is not None and not self._task.done()

    async def open(self) -> McpConnection:
        self._task = asyncio.create_task(self._own(), name=f"mcp:{self.server.name}")
        try:
            await asyncio.wait_for(self._ready.wait(), timeout=self.server.timeout_seconds)
        except TimeoutError:
            await self.aclose()
            raise McpUnavailable(
                f"MCP server {self.server.name!r} did not answer within {self.server.timeout_seconds:g}s"
            ) from None
        if self.client is None:
            raise McpUnavailable(f"MCP server {self.server.name!r} is unavailable: {self.error!r}") from self.error
        return self

    async def _own(self) -> None:
        try:
            async with make_client(self.server) as client:
                self.client = client
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # the SDK raises ExceptionGroups, OSErrors, ...: report, never crash the worker
            self.error = exc
            log.warning("MCP server %s: session ended: %r", self.server.name, exc)
        finally:
            self.client = None
            self._ready.set()

    async def aclose(self) -> None:
        self._stop.set()
        if self._task is not None and self.client is None and not self._task.done():
            self._task.cancel()  # still connecting: nothing to close politely
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=_CLOSE_TIMEOUT_SECONDS)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task


class McpConnections:
    """The worker's open MCP sessions, by server name (``Services.mcp``, closed with the services)."""

    def __init__(self) -> None:
        self._connections: dict[str, McpConnection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, server: McpServerConfig) -> McpConnection:
        lock = self._locks.setdefault(server.name, asyncio.Lock())
        async with lock:
            conn = self._connections.get(server.name)
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                await conn.aclose()
            conn = await McpConnection(server).open()
            self._connections[server.name] = conn
            return conn

    async def drop(self, server: McpServerConfig) -> None:
        conn = self._connections.pop(server.name, None)
        if conn is not None:
            await conn.aclose()

    async def call_tool(self, server: McpServerConfig, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        conn = await self.get(server)
        assert conn.client is not None
        try:
            return await conn.client.call_tool(tool, arguments, read_timeout_seconds=server.timeout_seconds)
        except Exception as exc:
            if not is_protocol_error(exc):
                # The session is in doubt (broken pipe, server gone): the next call starts a fresh one.
                await self.drop(server)
            raise

    async def aclose(self) -> None:
        for name in list(self._connections):
            conn = self._connections.pop(name)
            await conn.aclose()


def render_result(result: CallToolResult) -> str:
    """The model's text for a tool result: text parts verbatim, other content described, else the JSON."""
    parts: list[str] = []
    for item in result.content:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(str(getattr(item, "text", "")))
        elif kind in ("image", "audio"):
            data = str(getattr(item, "data", ""))
            parts.append(f"[{kind} {getattr(item, 'mime_type', '')}, {len(data) * 3 // 4} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(item, 'uri', '')}: {getattr(item, 'name', '')}]")
        elif kind == "resource":
            resource = getattr(item, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(str(text) if text is not None else f"[resource {getattr(resource, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'content'}]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)
