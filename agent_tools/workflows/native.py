"""Registry of workflow-native tools: orchestration that runs inside the session, not as an activity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# tool name -> name of the AgentSession method that handles it: ``async def m(self, args, call) -> ToolCallOutput``
NATIVE_TOOLS: dict[str, str] = {}


def native_tool(*names: str) -> Callable[[F], F]:
    """Mark a session method as the handler of one or more workflow-native tools."""

    def register(method: F) -> F:
        for name in names:
            NATIVE_TOOLS[name] = method.__name__
        return method

    return register
