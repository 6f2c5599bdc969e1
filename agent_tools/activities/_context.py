"""What a built-in tool implementation receives and may return."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agent_tools._activity_io import SessionRef, ToolCallOutput
from agent_tools.activities._services import Services


@dataclass(frozen=True)
class BuiltinContext:
    services: Services
    session: SessionRef
    call_id: str
    tool: str


ToolReturn = ToolCallOutput | BaseModel | str | bytes | dict[str, Any] | list[Any]
ToolImpl = Callable[[Any, BuiltinContext], Awaitable[ToolReturn]]
