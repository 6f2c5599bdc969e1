"""Durable Agent Tools: LLM agent sessions as Temporal workflows, with every built-in tool.

The public API is what this package exports (``__all__``), with two small faces beside it:
:mod:`agent_tools.testing` (the scripted model) and :mod:`agent_tools.contracts` (the data a caller passes
to sessions and tools and reads back). Every other module is implementation and may change.

The names load lazily, so that importing a pure submodule (as a host's sandboxed workflow does) does not pull in the client,
the plugin or the activities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_tools.lazy import lazy_names

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
    "mcp_user_tools",
    "run_and_exit",
    "start_dev_server",
    "tool",
]

_LAZY = {
    # Sessions from a client
    "AgentToolsClient": "agent_tools.client",
    "SessionHandle": "agent_tools.client",
    "SessionRequest": "agent_tools.session",
    "SessionOptions": "agent_tools.session",
    "SessionResult": "agent_tools.session",
    "SessionStatus": "agent_tools.session",
    "ProgressEvent": "agent_tools.activity_io",
    "LiveText": "agent_tools.live_text",
    "TextUpdate": "agent_tools.live_text",
    "ToolsClient": "agent_tools.web_client",
    "ResearchClient": "agent_tools.web_client",
    # Wiring it into a Temporal app
    "AgentToolsPlugin": "agent_tools.plugin",
    "compose_data_converter": "agent_tools.plugin",
    "compose_workflow_runner": "agent_tools.plugin",
    "build_worker": "agent_tools.worker",
    "mcp_user_tools": "agent_tools.activities.mcp.discovery",
    "start_dev_server": "agent_tools.devserver",
    "run_and_exit": "agent_tools.process_exit",
    # Your own tools
    "tool": "agent_tools.user_tools",
    "ToolContext": "agent_tools.user_tools",
    "ToolLevel": "agent_tools.catalog.spec",
    # Agents, settings and policies
    "AgentDefinition": "agent_tools.agents",
    "AgentRegistry": "agent_tools.agents",
    "Settings": "agent_tools.settings",
    "WebConfig": "agent_tools.contracts.web.config",
    "EventSettings": "agent_tools.contracts.events.settings",
    "MemoryPolicy": "agent_tools.contracts.memory",
    "SandboxSettings": "agent_tools.contracts.sandbox",
    "SkillsSettings": "agent_tools.contracts.skills",
    "BudgetSettings": "agent_tools.budget",
    "BudgetLimits": "agent_tools.budget",
    "ExecutionPolicy": "agent_tools.policy",
    "CallPolicy": "agent_tools.policy",
    # Errors
    "AgentToolsError": "agent_tools.errors",
    "ConfigurationError": "agent_tools.errors",
    "StoreNotReady": "agent_tools.errors",
    "InvalidInput": "agent_tools.errors",
    "ToolFailure": "agent_tools.errors",
    "SessionError": "agent_tools.errors",
    "WebToolError": "agent_tools.web_client",
}

if TYPE_CHECKING:
    from agent_tools.activities.mcp.discovery import mcp_user_tools
    from agent_tools.activity_io import ProgressEvent
    from agent_tools.agents import AgentDefinition, AgentRegistry
    from agent_tools.budget import BudgetLimits, BudgetSettings
    from agent_tools.catalog.spec import ToolLevel
    from agent_tools.client import AgentToolsClient, SessionHandle
    from agent_tools.contracts.events.settings import EventSettings
    from agent_tools.contracts.memory import MemoryPolicy
    from agent_tools.contracts.sandbox import SandboxSettings
    from agent_tools.contracts.skills import SkillsSettings
    from agent_tools.contracts.web.config import WebConfig
    from agent_tools.devserver import start_dev_server
    from agent_tools.errors import (
        AgentToolsError,
        ConfigurationError,
        InvalidInput,
        SessionError,
        StoreNotReady,
        ToolFailure,
    )
    from agent_tools.live_text import LiveText, TextUpdate
    from agent_tools.plugin import AgentToolsPlugin, compose_data_converter, compose_workflow_runner
    from agent_tools.policy import CallPolicy, ExecutionPolicy
    from agent_tools.process_exit import run_and_exit
    from agent_tools.session import SessionOptions, SessionRequest, SessionResult, SessionStatus
    from agent_tools.settings import Settings
    from agent_tools.user_tools import ToolContext, tool
    from agent_tools.web_client import ResearchClient, ToolsClient, WebToolError
    from agent_tools.worker import build_worker


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
