"""Discover the tools of the configured MCP servers and turn each into a catalog tool (a :class:`UserTool`).

    tools = await mcp_user_tools(McpConfig.from_file("mcp.json"))
    plugin = AgentToolsPlugin(settings, tools=[*my_tools, *tools])

Discovery runs once, when the worker starts (tools are part of the worker's catalog and activity set); each
tool then runs as its own activity ``tool:mcp__<server>__<tool>`` through the worker's shared connection to
the server. The model sees the server's own JSON Schema for the arguments; the activity validates the
arguments against it before calling the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from agent_tools._catalog.spec import ToolSpec
from agent_tools._errors import ConfigurationError, ToolFailure
from agent_tools._user_tools import UserTool
from agent_tools.activities._context import BuiltinContext
from agent_tools.activities._mcp.client import (
    McpUnavailable,
    is_protocol_error,
    list_all_tools,
    make_client,
    render_result,
)
from agent_tools.contracts._mcp.config import McpConfig, McpServerConfig
from agent_tools.contracts._mcp.naming import catalog_tool_name

log = logging.getLogger(__name__)

MAX_DESCRIPTION = 2000


class _Missing:
    """Default of an argument the model left out (distinct from an explicit null)."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Any = _Missing()


class McpArgsBase(BaseModel):
    """Base of a generated arguments model: the server's schema is the contract, checked with jsonschema."""

    model_config = ConfigDict(extra="allow", populate_by_name=False, arbitrary_types_allowed=True)
    mcp_schema: ClassVar[dict[str, Any]] = {}
    mcp_fields: ClassVar[dict[str, str]] = {}  # python field name -> argument name

    @model_validator(mode="before")
    @classmethod
    def _check_schema(cls, data: Any) -> Any:
        import jsonschema  # type: ignore[import-untyped]  # (no stubs; a dependency of mcp)

        if not isinstance(data, dict):
            raise ValueError("arguments must be a JSON object")
        validator = jsonschema.Draft202012Validator(cls.mcp_schema)
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
        if errors:
            raise ValueError("; ".join(f"{'/'.join(map(str, e.path)) or '(arguments)'}: {e.message}" for e in errors))
        return data

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The server's schema as is: it is what the model must see."""
        return dict(cls.mcp_schema)


def _input_schema(tool: Any) -> dict[str, Any]:
    schema = dict(getattr(tool, "input_schema", None) or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def args_model_for(name: str, schema: dict[str, Any]) -> type[McpArgsBase]:
    """A pydantic model whose fields are the schema's top-level properties (so ``UserTool`` passes them on).

    Field names are generated (``a0``, ``a1``, ...) with the property names as aliases: MCP argument names
    need not be Python identifiers and may clash with pydantic's own attributes.
    """
    props = schema.get("properties") or {}
    fields: dict[str, Any] = {}
    mapping: dict[str, str] = {}
    for i, prop in enumerate(props):
        fields[f"a{i}"] = (Any, Field(default=MISSING, alias=str(prop)))
        mapping[f"a{i}"] = str(prop)
    model: type[McpArgsBase] = create_model(f"{name}_args", __base__=McpArgsBase, **fields)
    model.mcp_schema = schema
    model.mcp_fields = mapping
    return model


def user_tool_for(server: McpServerConfig, tool: Any) -> UserTool:
    """One MCP tool as a catalog tool that calls the server through the worker's connection."""
    name = catalog_tool_name(server.name, tool.name)
    model = args_model_for(name, _input_schema(tool))
    remote = str(tool.name)
    description = (tool.description or tool.name).strip()
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 3] + "..."

    async def call(context: BuiltinContext, extra_arguments: dict[str, Any] | None = None, **kwargs: Any) -> str:
        from mcp.shared.exceptions import MCPError

        # Already validated against the schema by the tool runner: only map field names back to argument names.
        # Arguments the schema allows beyond its properties (additionalProperties, or no properties at all)
        # come as ``extra_arguments`` under their own names; they never clash with a property's name.
        arguments = {model.mcp_fields[k]: v for k, v in kwargs.items() if k in model.mcp_fields and v is not MISSING}
        arguments.update(extra_arguments or {})
        try:
            result = await context.services.mcp.call_tool(server, remote, arguments)
        except McpUnavailable as exc:
            raise ToolFailure(str(exc)) from exc
        except MCPError as exc:
            if not is_protocol_error(exc):
                raise  # the connection was lost mid-call: the activity fails and Temporal's retry policy decides
            raise ToolFailure(f"MCP server {server.name!r} refused {remote!r}: {exc}") from exc
        except TimeoutError as exc:
            raise ToolFailure(f"MCP tool {remote!r} timed out after {server.timeout_seconds:g}s") from exc
        text = render_result(result)
        if result.is_error:
            raise ToolFailure(text or f"MCP tool {remote!r} failed")
        return text

    first_str = next(
        (
            f
            for f, p in model.mcp_fields.items()
            if (model.mcp_schema["properties"].get(p) or {}).get("type") == "string"
        ),
        None,
    )
    spec = ToolSpec(
        name=name,
        description=f"[MCP {server.name}] {description}",
        args_model=model,
        capability="mcp",
        level=server.level,
        summary_arg=model.mcp_fields.get(first_str) if first_str else None,
    )
    return UserTool(spec=spec, function=call, wants_context=True, builtin_context=True)


async def discover_server(server: McpServerConfig) -> list[UserTool]:
    """Connect once, list the server's tools, close; returns its wanted tools as catalog tools."""

    async def listing() -> list[Any]:
        async with make_client(server) as client:
            return await list_all_tools(client)

    try:
        # Bounded: a command that starts but never speaks MCP must not hang the worker's start.
        tools = await asyncio.wait_for(listing(), timeout=server.timeout_seconds)
    except TimeoutError as exc:
        raise McpUnavailable(f"MCP server {server.name!r}: no tool list within {server.timeout_seconds:g}s") from exc
    except Exception as exc:
        raise McpUnavailable(f"MCP server {server.name!r}: cannot list tools: {exc!r}") from exc
    return [user_tool_for(server, t) for t in tools if server.wants(t.name)]


async def mcp_user_tools(
    config: McpConfig | Iterable[McpServerConfig], *, skip_unavailable: bool = True
) -> list[UserTool]:
    """Every tool of every configured server, ready for ``AgentToolsPlugin(tools=...)``.

    Args:
        config: The deployment's MCP servers.
        skip_unavailable: Log and skip a server that cannot be reached (the worker still starts, without its
            tools) instead of raising :class:`McpUnavailable`.

    Raises:
        ConfigurationError: Two tools map to the same catalog name.
    """
    servers = config.servers if isinstance(config, McpConfig) else list(config)
    found: list[UserTool] = []
    for server in servers:
        try:
            found.extend(await discover_server(server))
        except McpUnavailable:
            if not skip_unavailable:
                raise
            log.exception("MCP server %s skipped", server.name)
    names = [t.spec.name for t in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigurationError(f"MCP tools map to the same name: {dupes}")
    return found
