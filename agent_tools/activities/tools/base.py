"""What a tool implementation receives and may return."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agent_tools.activities.services import Services
from agent_tools.activity_io import SessionRef, ToolCallOutput


@dataclass(frozen=True)
class ToolContext:
    services: Services
    session: SessionRef
    call_id: str
    tool: str


class ToolFailure(Exception):
    """Raised by a tool to give the model an error result (not an activity failure, not retried)."""

    def __init__(self, message: str, *, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data


ToolReturn = ToolCallOutput | BaseModel | str | dict[str, Any] | list[Any]
ToolImpl = Callable[[Any, ToolContext], Awaitable[ToolReturn]]
