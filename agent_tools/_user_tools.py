"""The user's own tools: a typed async function becomes a tool with a schema derived from its signature.

    @tool(description="Look up the weather")
    async def weather(city: str, days: int = 3, *, context: ToolContext) -> str:
        context.logger.info("looking up %s", city)
        r = await context.http.get(f"https://weather.example/{city}")
        ...

    plugin = AgentToolsPlugin(tools=[weather])

Each runs as its own activity (``tool:weather``), side by side with the built-ins. A parameter named
``context`` receives a :class:`ToolContext`; it is not part of the schema the model sees.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, create_model

from agent_tools._catalog.spec import ToolLevel, ToolSpec
from agent_tools._errors import ConfigurationError

if TYPE_CHECKING:
    import httpx

__all__ = [
    "EXTRA_ARGUMENTS",
    "ToolContext",
    "UserTool",
    "make_user_tool",
    "tool",
]

UserFunction = Callable[..., Awaitable[Any]]
# The keyword that carries the arguments an argument model allowed beyond its fields (see MCP tools).
EXTRA_ARGUMENTS = "extra_arguments"


@dataclass(frozen=True)
class ToolContext:
    """What a user tool may know about the call it serves, and the worker's shared means to do its work.

    Attributes:
        session_id: The calling session (a Temporal workflow id).
        run_id: The session's current run (continue-as-new starts a new one).
        call_id: The model's id for this call; stable across retries of the activity, so a tool can use it
            as an idempotency key.
        tool: The tool's name.
        agent: The agent the session runs.
        organisation: The session's organisation.
        project: The session's project.
        user: The session's user.
        attempt: The activity attempt (1 on the first try).
        http: The worker's shared HTTP client (no retries of its own: Temporal retries the activity).
        logger: Logs with the session and call in every record.
    """

    session_id: str
    run_id: str
    call_id: str
    tool: str
    agent: str
    organisation: str
    project: str
    user: str
    attempt: int
    http: httpx.AsyncClient
    logger: logging.LoggerAdapter[logging.Logger]

    def heartbeat(self, *details: Any) -> None:
        """Tell Temporal the call is alive (long tools should call it at least every few seconds)."""
        from temporalio import activity

        if activity.in_activity():
            activity.heartbeat(*details)


@dataclass(frozen=True)
class UserTool:
    spec: ToolSpec
    function: UserFunction
    # Whether the function takes a ``context`` keyword (a :class:`ToolContext`).
    wants_context: bool = False
    # Engine-made tools (MCP servers' tools) get the worker's whole services instead (an
    # ``agent_tools.activities._context.BuiltinContext``); the user's own tools never do.
    builtin_context: bool = False


@overload
def tool(fn: UserFunction, /) -> UserTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    level: ToolLevel = ToolLevel.none,
    spill_exempt: bool = False,
    requires_approval: bool = False,
    read_only: bool = False,
) -> Callable[[UserFunction], UserTool]: ...


def tool(
    fn: UserFunction | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    level: ToolLevel = ToolLevel.none,
    spill_exempt: bool = False,
    requires_approval: bool = False,
    read_only: bool = False,
) -> UserTool | Callable[[UserFunction], UserTool]:
    """Decorator (with or without arguments) turning an async function into a :class:`UserTool`.

    Args:
        fn: The function (when used as ``@tool`` without arguments).
        name: The tool's name for the model; the function's name when omitted.
        description: What the model reads; the docstring when omitted.
        level: The tool level an agent needs to be offered it.
        spill_exempt: Never save the result as an artifact, however large.
        requires_approval: Every call waits for a person's approval first (docs/approvals.md).
        read_only: The tool only reads (changes nothing anywhere): codai's ``explore`` sub-agents get it.
    """

    def wrap(f: UserFunction) -> UserTool:
        return make_user_tool(
            f,
            name=name,
            description=description,
            level=level,
            spill_exempt=spill_exempt,
            requires_approval=requires_approval,
            read_only=read_only,
        )

    return wrap(fn) if fn is not None else wrap


def make_user_tool(
    fn: UserFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    level: ToolLevel = ToolLevel.none,
    spill_exempt: bool = False,
    requires_approval: bool = False,
    read_only: bool = False,
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
        requires_approval=requires_approval,
        read_only=read_only,
    )
    return UserTool(spec=spec, function=fn, wants_context=wants_context)
