"""MCP tools: naming and configuration (pure), discovery against a real stdio server (tests/fixtures/mcp_server.py)
and over streamable HTTP, and calls through a real session on the Temporal dev server with the scripted model."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import pytest_asyncio
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from agent_tools._agents import AgentDefinition
from agent_tools._catalog.spec import ToolLevel
from agent_tools._errors import ConfigurationError
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._user_tools import UserTool
from agent_tools.activities._context import BuiltinContext
from agent_tools.activities._mcp import McpConnections, McpUnavailable, mcp_user_tools
from agent_tools.activities._mcp.client import render_result
from agent_tools.activities._mcp.discovery import user_tool_for
from agent_tools.activities._tool_runner import _user_impl
from agent_tools.contracts._mcp import McpConfig, McpServerConfig, catalog_tool_name
from tests.support.fixture_types import Script, WorkerFor
from tests.support.mcp import SERVER, fixture_server

ECHO = catalog_tool_name("fixture", "echo.upper")


@pytest_asyncio.fixture(scope="module")
async def discovered() -> list[UserTool]:
    return await mcp_user_tools(McpConfig(servers=[fixture_server(env={"FIXTURE_TOKEN": "given"})]))


def by_name(tools: list[UserTool]) -> dict[str, UserTool]:
    return {t.spec.name: t for t in tools}


# ---- pure -------------------------------------------------------------------------------------------


def test_catalog_names() -> None:
    assert catalog_tool_name("github", "create_issue") == "mcp__github__create_issue"
    dotted = catalog_tool_name("fixture", "echo.upper")
    assert dotted.startswith("mcp__fixture__echo_upper_") and dotted != catalog_tool_name("fixture", "echo_upper")
    long = catalog_tool_name("server", "x" * 100)
    assert len(long) == 64 and long == catalog_tool_name("server", "x" * 100)
    assert long != catalog_tool_name("server", "x" * 99 + "y")


def test_config_forms_and_validation(tmp_path: Path) -> None:
    shared = {
        "mcpServers": {
            "files": {"command": "npx", "args": ["server"], "env": {"A": "1"}},
            "issues": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer x"}},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(shared))
    config = McpConfig.from_file(path)
    assert [(s.name, s.transport) for s in config.servers] == [("files", "stdio"), ("issues", "streamable-http")]
    assert config.servers[0].level == ToolLevel.l1_http  # codai: MCP tools need a tool level above none
    assert McpConfig.from_file(tmp_path / "missing.json").servers == []
    with pytest.raises(ValidationError, match="exactly one"):
        McpServerConfig(name="x", command="a", url="http://h/mcp")
    with pytest.raises(ValidationError):
        McpServerConfig(name="bad name", command="a")
    with pytest.raises(ConfigurationError, match="unique"):
        McpConfig.parse({"servers": [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]})


class _RecordingConnections(McpConnections):
    """Records the arguments a call would send to the server."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[dict[str, Any]] = []

    async def call_tool(self, server: McpServerConfig, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        self.sent.append(arguments)
        return CallToolResult(content=[TextContent(type="text", text="ok")])


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [
        # Open-ended arguments next to a declared one (additionalProperties)...
        (
            {"type": "object", "properties": {"title": {"type": "string"}}, "additionalProperties": True},
            {"title": "t", "labels": {"area": "ui"}, "a0": 1, "context": "c"},
        ),
        # ... and a schema without properties: every argument is the tool's own.
        ({"type": "object"}, {"query": "q", "limit": 3}),
        # Declared arguments only, nested values included; one left out stays out.
        (
            {"type": "object", "properties": {"filter": {"type": "object"}, "page": {"type": "integer"}}},
            {"filter": {"state": {"in": ["open"]}}},
        ),
    ],
)
async def test_every_argument_the_schema_allows_reaches_the_server(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    listed = SimpleNamespace(name="open_tool", description="d", input_schema=schema)
    tool = user_tool_for(fixture_server(), listed)
    conns = _RecordingConnections()
    ctx = BuiltinContext(services=cast(Any, SimpleNamespace(mcp=conns)), session=cast(Any, None),
                      call_id="c1", tool=tool.spec.name)  # fmt: skip
    args = tool.spec.validate_arguments(arguments)
    assert await _user_impl(tool)(args, ctx) == "ok"
    assert conns.sent == [arguments]


def test_a_closed_schema_still_refuses_undeclared_arguments() -> None:
    listed = SimpleNamespace(
        name="closed",
        description="d",
        input_schema={"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    )
    spec = user_tool_for(fixture_server(), listed).spec
    with pytest.raises(ValidationError, match="Additional properties are not allowed"):
        spec.validate_arguments({"a": 1, "b": 2})


# ---- discovery --------------------------------------------------------------------------------------


async def test_discovery_exposes_the_servers_tools_and_schemas(discovered: list[UserTool]) -> None:
    tools = by_name(discovered)
    assert set(tools) == {
        "mcp__fixture__add",
        ECHO,
        "mcp__fixture__whoami",
        "mcp__fixture__fail",
        "mcp__fixture__counter",
        "mcp__fixture__crash",
    }
    add = tools["mcp__fixture__add"].spec
    assert add.description == "[MCP fixture] Add two integers and return the sum."
    schema = add.parameters_schema()
    assert schema["properties"] == {"a": {"type": "integer"}, "b": {"type": "integer"}}
    assert schema["required"] == ["a", "b"]
    assert add.level == ToolLevel.l1_http and add.runs_in == "activity"
    # Arguments are checked against the server's schema before any call.
    with pytest.raises(ValidationError, match="'x' is not of type 'integer'"):
        add.validate_arguments({"a": "x", "b": 1})
    with pytest.raises(ValidationError, match="'b' is a required property"):
        add.validate_arguments({"a": 1})
    assert tools[ECHO].spec.summary({"text": "hello"}) == f'{ECHO}: "hello"'


async def test_allow_list_and_unavailable_servers() -> None:
    only = await mcp_user_tools([fixture_server(tools=["add", "fail"], exclude_tools=["fail"])])
    assert [t.spec.name for t in only] == ["mcp__fixture__add"]
    missing = McpServerConfig(name="gone", command="/nonexistent/mcp-server", timeout_seconds=10)
    assert await mcp_user_tools([missing]) == []  # logged and skipped: the worker still starts
    with pytest.raises(McpUnavailable, match="gone"):
        await mcp_user_tools([missing], skip_unavailable=False)
    mute = McpServerConfig(
        name="mute", command=sys.executable, args=["-c", "import time; time.sleep(60)"], timeout_seconds=2
    )
    started = time.monotonic()
    with pytest.raises(McpUnavailable, match="no tool list within 2s"):
        await mcp_user_tools([mute], skip_unavailable=False)
    assert time.monotonic() - started < 10


async def test_connection_is_reused_and_reopened() -> None:
    conns = McpConnections()
    server = fixture_server()
    try:
        first = render_result(await conns.call_tool(server, "counter", {}))
        second = render_result(await conns.call_tool(server, "counter", {}))
        assert first.startswith("1 pid=") and second == first.replace("1 pid=", "2 pid=")
        await conns.drop(server)  # as after a broken session: the next call opens a new one
        third = render_result(await conns.call_tool(server, "counter", {}))
        assert third.startswith("1 pid=") and third != first
        # A server that dies mid-call: the call fails (not retried here), the next one gets a new process.
        with pytest.raises(MCPError, match="Connection closed"):
            await conns.call_tool(server, "crash", {})
        fourth = render_result(await conns.call_tool(server, "counter", {}))
        assert fourth.startswith("1 pid=") and fourth != third
    finally:
        await conns.aclose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--http", str(port)], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("the HTTP fixture server exited")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_streamable_http_server(http_server: str) -> None:
    server = McpServerConfig(name="web", url=http_server, timeout_seconds=30)
    tools = by_name(await mcp_user_tools([server], skip_unavailable=False))
    assert "mcp__web__add" in tools
    conns = McpConnections()
    try:
        assert render_result(await conns.call_tool(server, "add", {"a": 40, "b": 2})) == "42"
    finally:
        await conns.aclose()


# ---- through a session ------------------------------------------------------------------------------


async def test_mcp_tools_in_a_session(
    discovered: list[UserTool],
    settings: Settings,
    script: Script,
    worker_for: WorkerFor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WORKER_SECRET_TOKEN", "do-not-leak")
    settings.model = script(
        [
            {
                "tool_calls": [
                    {"name": "mcp__fixture__add", "arguments": {"a": 19, "b": 23}},
                    {"name": ECHO, "arguments": {"text": "quiet"}},
                    {"name": "mcp__fixture__fail", "arguments": {"reason": "testing"}},
                    {"name": "mcp__fixture__add", "arguments": {"a": "nope"}},
                ]
            },
            {"tool_calls": [{"name": "mcp__fixture__whoami", "arguments": {}}]},
            {"say": "done"},
        ]
    )
    names = [t.spec.name for t in discovered]
    agent = AgentDefinition(name="assistant", profile=None, tools=names)
    async with worker_for(tools=discovered, agents=[agent]) as client:
        handle = await client.start_session("use the MCP tools")
        assert (await handle.result()).status == SessionStatus.completed
        tool_msgs = [e.content for e in await handle.transcript() if e.role == "tool"]
    add, echo, fail, invalid, whoami = tool_msgs
    assert add == "42"
    assert echo == "QUIET"
    assert "fixture failure: testing" in fail
    assert "Invalid arguments for mcp__fixture__add" in invalid and "'nope' is not of type 'integer'" in invalid
    env_names, token = whoami.split("|")
    assert token == "FIXTURE_TOKEN=given"
    assert "WORKER_SECRET_TOKEN" not in env_names


def test_tool_level_none_gets_no_mcp_tools(discovered: list[UserTool]) -> None:
    from agent_tools._catalog.registry import ToolCatalog

    catalog = ToolCatalog([t.spec for t in discovered])
    names = [t.spec.name for t in discovered]
    assert catalog.resolve(profile=None, tools=names, level=ToolLevel.none) == []
    assert catalog.resolve(profile=None, tools=names, level=ToolLevel.l1_http) == names
