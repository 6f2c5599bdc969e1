"""Durable Agent Tools: LLM agent sessions as Temporal workflows, with every built-in tool.

The public API is small and loaded lazily, so that importing a pure submodule (as a host's sandboxed workflow
does) does not pull in the client, the plugin or the activities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "AgentDefinition",
    "AgentRegistry",
    "AgentToolsClient",
    "AgentToolsError",
    "AgentToolsPlugin",
    "CallPolicy",
    "ConfigurationError",
    "ExecutionPolicy",
    "ProgressEvent",
    "SessionError",
    "SessionHandle",
    "SessionRequest",
    "SessionResult",
    "SessionStatus",
    "Settings",
    "ToolContext",
    "ToolFailure",
    "ToolLevel",
    "tool",
]

_LAZY = {
    "AgentDefinition": "agent_tools.agents",
    "AgentRegistry": "agent_tools.agents",
    "AgentToolsClient": "agent_tools.client",
    "SessionHandle": "agent_tools.client",
    "AgentToolsError": "agent_tools.errors",
    "ConfigurationError": "agent_tools.errors",
    "SessionError": "agent_tools.errors",
    "ToolFailure": "agent_tools.errors",
    "AgentToolsPlugin": "agent_tools.plugin",
    "CallPolicy": "agent_tools.policy",
    "ExecutionPolicy": "agent_tools.policy",
    "ProgressEvent": "agent_tools.activity_io",
    "SessionRequest": "agent_tools.session",
    "SessionResult": "agent_tools.session",
    "SessionStatus": "agent_tools.session",
    "Settings": "agent_tools.settings",
    "ToolLevel": "agent_tools.catalog.spec",
    "ToolContext": "agent_tools.user_tools",
    "tool": "agent_tools.user_tools",
}

if TYPE_CHECKING:
    from agent_tools.activity_io import ProgressEvent
    from agent_tools.agents import AgentDefinition, AgentRegistry
    from agent_tools.catalog.spec import ToolLevel
    from agent_tools.client import AgentToolsClient, SessionHandle
    from agent_tools.errors import AgentToolsError, ConfigurationError, SessionError, ToolFailure
    from agent_tools.plugin import AgentToolsPlugin
    from agent_tools.policy import CallPolicy, ExecutionPolicy
    from agent_tools.session import SessionRequest, SessionResult, SessionStatus
    from agent_tools.settings import Settings
    from agent_tools.user_tools import ToolContext, tool


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_tools' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
