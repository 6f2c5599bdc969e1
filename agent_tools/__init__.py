"""Durable Agent Tools: LLM agent sessions as Temporal workflows, with every built-in tool.

The public API is small and loaded lazily, so that importing a pure submodule (as workflow sandboxes do)
does not pull in the client, the plugin or the activities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "AgentDefinition",
    "AgentToolsClient",
    "AgentToolsError",
    "AgentToolsPlugin",
    "SessionHandle",
    "SessionRequest",
    "SessionStatus",
    "Settings",
    "ToolLevel",
    "tool",
]

_LAZY = {
    "AgentDefinition": "agent_tools.agents",
    "AgentToolsClient": "agent_tools.client",
    "SessionHandle": "agent_tools.client",
    "AgentToolsError": "agent_tools.errors",
    "AgentToolsPlugin": "agent_tools.plugin",
    "SessionRequest": "agent_tools.session",
    "SessionStatus": "agent_tools.session",
    "Settings": "agent_tools.settings",
    "ToolLevel": "agent_tools.catalog.spec",
    "tool": "agent_tools.user_tools",
}

if TYPE_CHECKING:
    from agent_tools.agents import AgentDefinition
    from agent_tools.catalog.spec import ToolLevel
    from agent_tools.client import AgentToolsClient, SessionHandle
    from agent_tools.errors import AgentToolsError
    from agent_tools.plugin import AgentToolsPlugin
    from agent_tools.session import SessionRequest, SessionStatus
    from agent_tools.settings import Settings
    from agent_tools.user_tools import tool


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_tools' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
