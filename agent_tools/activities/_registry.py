"""Every activity the worker registers: one class per capability, built once with the worker's services.

Capability modules are imported by name: a module that is missing or fails to import stops the worker,
never silently removes its tools. ``tests/test_catalog.py`` checks that every tool in the catalog has
exactly one implementation, an activity here or a workflow-native handler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import agent_tools.activities._web_tools as web_tools
from agent_tools._user_tools import UserTool
from agent_tools.activities import _history as history
from agent_tools.activities import _memory_tools as memory
from agent_tools.activities import _results as results
from agent_tools.activities import _skills as skills
from agent_tools.activities._approvals import ApprovalActivities
from agent_tools.activities._context import ToolImpl
from agent_tools.activities._delegation import IMPLEMENTATIONS as DELEGATION_TOOLS
from agent_tools.activities._delegation import DelegationActivities
from agent_tools.activities._engine import EngineActivities
from agent_tools.activities._events import EventActivities
from agent_tools.activities._planning import PlanningActivities
from agent_tools.activities._research import ResearchActivities
from agent_tools.activities._sandbox import tool as sandbox
from agent_tools.activities._services import ContextHook, ServicesHolder
from agent_tools.activities._tool_runner import ToolActivities

# The activity tools of each capability (name -> implementation); the tool runner makes one activity of each.
TOOL_TABLES: tuple[dict[str, ToolImpl], ...] = (
    history.IMPLEMENTATIONS,
    web_tools.IMPLEMENTATIONS,
    memory.IMPLEMENTATIONS,
    results.IMPLEMENTATIONS,
    DELEGATION_TOOLS,
    sandbox.IMPLEMENTATIONS,
    skills.IMPLEMENTATIONS,
)
# The classes whose methods are the activities that are not tools (judge a goal, subscribe to events, ...).
ACTIVITY_CLASSES = (
    EngineActivities,
    PlanningActivities,
    DelegationActivities,
    EventActivities,
    ResearchActivities,
    ApprovalActivities,
)


def builtin_implementations() -> dict[str, ToolImpl]:
    impls: dict[str, ToolImpl] = {}
    for table in TOOL_TABLES:
        for name, impl in table.items():
            if name in impls:
                raise RuntimeError(f"tool {name!r} has two implementations")
            impls[name] = impl
    return impls


def builtin_context_hooks() -> list[ContextHook]:
    """Per-step system text (the Memory Context block)."""
    return list(memory.CONTEXT_HOOKS)


def activity_methods(instance: object) -> list[Callable[..., Any]]:
    """The bound ``@activity.defn`` methods of ``instance``, in the order its class defines them."""
    return [
        getattr(instance, name)
        for name, member in vars(type(instance)).items()
        if hasattr(member, "__temporal_activity_definition")
    ]


def all_activities(services: ServicesHolder, user_tools: Sequence[UserTool] = ()) -> list[Callable[..., Any]]:
    acts = ToolActivities(services, builtin_implementations(), user_tools).activities()
    for cls in ACTIVITY_CLASSES:
        acts += activity_methods(cls(services))
    return acts
