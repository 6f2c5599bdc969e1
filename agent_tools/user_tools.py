"""The user's own tools: a typed async function becomes a tool with a schema derived from its signature.

    @tool(description="Look up the weather")
    async def weather(city: str, days: int = 3) -> str: ...

    plugin = AgentToolsPlugin(tools=[weather])

Each runs as its own activity (``tool:weather``), side by side with the built-ins.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model

from agent_tools.catalog.spec import ToolLevel, ToolSpec
from agent_tools.errors import ConfigurationError

UserFunction = Callable[..., Awaitable[Any]]
# The keyword that carries the arguments an argument model allowed beyond its fields (see MCP tools).
EXTRA_ARGUMENTS = "extra_arguments"


@dataclass(frozen=True)
class UserTool:
    spec: ToolSpec
    function: UserFunction
    # Whether the function takes a ``context`` keyword (the :class:`agent_tools.activities.tools.base.ToolContext`).
    wants_context: bool = False


def tool(
    fn: UserFunction | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    level: ToolLevel = ToolLevel.none,
    spill_exempt: bool = False,
) -> Any:
    """Decorator (with or without arguments) turning an async function into a :class:`UserTool`."""

    def wrap(f: UserFunction) -> UserTool:
        return make_user_tool(f, name=name, description=description, level=level, spill_exempt=spill_exempt)

    return wrap(fn) if fn is not None else wrap


def make_user_tool(
    fn: UserFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    level: ToolLevel = ToolLevel.none,
    spill_exempt: bool = False,
) -> UserTool:
    if not inspect.iscoroutinefunction(fn):
        raise ConfigurationError(f"tool {fn.__name__!r} must be an async function")
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    wants_context = False
    for pname, param in inspect.signature(fn).parameters.items():
        if pname == "context":
            wants_context = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigurationError(f"tool {fn.__name__!r}: *args/**kwargs cannot be described to a model")
        if pname not in hints:
            raise ConfigurationError(f"tool {fn.__name__!r}: parameter {pname!r} needs a type annotation")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints[pname], default)
    tool_name = name or fn.__name__
    args_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    doc = description or inspect.getdoc(fn) or tool_name
    first_str = next((k for k, (t, _) in fields.items() if t is str), None)
    spec = ToolSpec(
        name=tool_name,
        description=doc,
        args_model=args_model,
        capability="user",
        level=level,
        spill_exempt=spill_exempt,
        summary_arg=first_str,
    )
    return UserTool(spec=spec, function=fn, wants_context=wants_context)
