"""Every activity the worker registers: the engine's, one per activity tool, and capability extras."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agent_tools.activities.engine import build_engine_activities
from agent_tools.activities.services import ServicesHolder
from agent_tools.activities.tool_runner import build_tool_activities
from agent_tools.activities.tools.registry import builtin_implementations
from agent_tools.modules import present_modules
from agent_tools.user_tools import UserTool

# Capability modules with activities that are not tools (judge a goal, subscribe to events, ...); each
# exports ``build_activities(holder) -> list``.
EXTRA_ACTIVITY_MODULES: tuple[str, ...] = (
    "agent_tools.activities.planning",
    "agent_tools.activities.delegation",
    "agent_tools.activities.events",
    "agent_tools.activities.research",
)


def all_activities(holder: ServicesHolder, user_tools: Sequence[UserTool] = ()) -> list[Callable[..., Any]]:
    acts = build_engine_activities(holder)
    acts += build_tool_activities(holder, builtin_implementations(), user_tools)
    for module in present_modules(EXTRA_ACTIVITY_MODULES):
        acts += module.build_activities(holder)
    return acts
