"""Durable Agent Tools: LLM agent sessions as Temporal workflows, with every built-in tool.

The public API is what this package exports (``__all__``), with two small faces beside it:
:mod:`agent_tools.testing` (the scripted model) and :mod:`agent_tools.contracts` (the data a caller passes
to sessions and tools and reads back). Every other module is implementation and may change.

The names load lazily, so that importing a pure submodule (as a host's sandboxed workflow does) does not
pull in the client, the plugin or the activities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_tools._lazy import lazy_names

__all__ = [
    "AgentDefinition",
    "AgentRegistry",
    "AgentToolsClient",
    "AgentToolsError",
    "AgentToolsPlugin",
    "BudgetLimits",
    "BudgetSettings",
    "CallPolicy",
    "ConfigurationError",
    "EventSettings",
    "ExecutionPolicy",
    "InvalidInput",
    "LiveText",
    "MemoryPolicy",
    "ModelProvider",
    "ProgressEvent",
    "ResearchClient",
    "SandboxSettings",
    "SessionError",
    "SessionHandle",
    "SessionOptions",
    "SessionRequest",
    "SessionResult",
    "SessionStatus",
    "Settings",
    "SharedStore",
    "SkillsSettings",
    "StoreNotReady",
    "TextUpdate",
    "ToolContext",
    "ToolFailure",
    "ToolLevel",
    "ToolsClient",
    "WebConfig",
    "WebToolError",
    "build_worker",
    "compose_data_converter",
    "compose_workflow_runner",
    "embedded",
    "mcp_user_tools",
    "run_and_exit",
    "start_dev_server",
    "tool",
]

_LAZY = {
    # Sessions from a client
    "AgentToolsClient": "agent_tools._client",
    "SessionHandle": "agent_tools._client",
    "SessionRequest": "agent_tools._session",
    "SessionOptions": "agent_tools._session",
    "SessionResult": "agent_tools._session_views",
    "SessionStatus": "agent_tools._session_views",
    "ProgressEvent": "agent_tools._activity_io",
    "LiveText": "agent_tools._live_text",
    "TextUpdate": "agent_tools._live_text",
    "ToolsClient": "agent_tools._web_client",
    "ResearchClient": "agent_tools._web_client",
    "SharedStore": "agent_tools._store.db",
    # Wiring it into a Temporal app
    "AgentToolsPlugin": "agent_tools._plugin",
    "compose_data_converter": "agent_tools._connection",
    "compose_workflow_runner": "agent_tools._plugin",
    "build_worker": "agent_tools._worker",
    "mcp_user_tools": "agent_tools.activities._mcp.discovery",
    "ModelProvider": "agent_tools.activities._providers.base",
    "start_dev_server": "agent_tools._devserver",
    "embedded": "agent_tools._embedded",
    "run_and_exit": "agent_tools._process_exit",
    # Your own tools
    "tool": "agent_tools._user_tools",
    "ToolContext": "agent_tools._user_tools",
    "ToolLevel": "agent_tools._catalog.spec",
    # Agents, settings and policies
    "AgentDefinition": "agent_tools._agents",
    "AgentRegistry": "agent_tools._agents",
    "Settings": "agent_tools._settings",
    "WebConfig": "agent_tools.contracts._web.config",
    "EventSettings": "agent_tools.contracts._events.settings",
    "MemoryPolicy": "agent_tools.contracts._memory.settings",
    "SandboxSettings": "agent_tools.contracts._sandbox",
    "SkillsSettings": "agent_tools.contracts._skills",
    "BudgetSettings": "agent_tools._budget",
    "BudgetLimits": "agent_tools._budget",
    "ExecutionPolicy": "agent_tools._policy",
    "CallPolicy": "agent_tools._policy",
    # Errors
    "AgentToolsError": "agent_tools._errors",
    "ConfigurationError": "agent_tools._errors",
    "StoreNotReady": "agent_tools._errors",
    "InvalidInput": "agent_tools._errors",
    "ToolFailure": "agent_tools._errors",
    "SessionError": "agent_tools._errors",
    "WebToolError": "agent_tools._web_client",
}

if TYPE_CHECKING:
    from agent_tools._activity_io import ProgressEvent
    from agent_tools._agents import AgentDefinition, AgentRegistry
    from agent_tools._budget import BudgetLimits, BudgetSettings
    from agent_tools._catalog.spec import ToolLevel
    from agent_tools._client import AgentToolsClient, SessionHandle
    from agent_tools._connection import compose_data_converter
    from agent_tools._devserver import start_dev_server
    from agent_tools._embedded import embedded
    from agent_tools._errors import (
        AgentToolsError,
        ConfigurationError,
        InvalidInput,
        SessionError,
        StoreNotReady,
        ToolFailure,
    )
    from agent_tools._live_text import LiveText, TextUpdate
    from agent_tools._plugin import AgentToolsPlugin, compose_workflow_runner
    from agent_tools._policy import CallPolicy, ExecutionPolicy
    from agent_tools._process_exit import run_and_exit
    from agent_tools._session import SessionOptions, SessionRequest
    from agent_tools._session_views import SessionResult, SessionStatus
    from agent_tools._settings import Settings
    from agent_tools._store.db import SharedStore
    from agent_tools._user_tools import ToolContext, tool
    from agent_tools._web_client import ResearchClient, ToolsClient, WebToolError
    from agent_tools._worker import build_worker
    from agent_tools.activities._mcp.discovery import mcp_user_tools
    from agent_tools.activities._providers.base import ModelProvider
    from agent_tools.contracts._events.settings import EventSettings
    from agent_tools.contracts._memory.settings import MemoryPolicy
    from agent_tools.contracts._sandbox import SandboxSettings
    from agent_tools.contracts._skills import SkillsSettings
    from agent_tools.contracts._web.config import WebConfig


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
