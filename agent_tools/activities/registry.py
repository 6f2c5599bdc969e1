"""Every activity the worker registers: the engine's, one per activity tool, and the capabilities' others.

Capability modules are imported by name: a module that is missing or fails to import stops the worker,
never silently removes its tools. ``tests/test_catalog.py`` checks that every tool in the catalog has
exactly one implementation, an activity here or a workflow-native handler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agent_tools.activities import (
    approvals,
    delegation,
    events,
    history,
    memory,
    planning,
    research,
    results,
    sandbox,
    skills,
)
from agent_tools.activities.context import ToolImpl
from agent_tools.activities.engine import build_engine_activities
from agent_tools.activities.services import ContextHook, ServicesHolder
from agent_tools.activities.tool_runner import build_tool_activities
from agent_tools.activities.web import tools as web_tools
from agent_tools.user_tools import UserTool

# Modules whose ``IMPLEMENTATIONS`` are activity tools.
TOOL_MODULES = (history, web_tools, memory, results, delegation, sandbox, skills)
# Modules with activities that are not tools (judge a goal, subscribe to events, walk the tree, ...).
ACTIVITY_MODULES = (planning, delegation, events, research, approvals)


def builtin_implementations() -> dict[str, ToolImpl]:
    impls: dict[str, ToolImpl] = {}
    for module in TOOL_MODULES:
        for name, impl in module.IMPLEMENTATIONS.items():
            if name in impls:
                raise RuntimeError(f"tool {name!r} has two implementations")
            impls[name] = impl
    return impls


def builtin_context_hooks() -> list[ContextHook]:
    """Per-step system text (the Memory Context block)."""
    return list(memory.CONTEXT_HOOKS)


def all_activities(holder: ServicesHolder, user_tools: Sequence[UserTool] = ()) -> list[Callable[..., Any]]:
    acts = build_engine_activities(holder)
    acts += build_tool_activities(holder, builtin_implementations(), user_tools)
    for module in ACTIVITY_MODULES:
        acts += module.build_activities(holder)
    return acts
