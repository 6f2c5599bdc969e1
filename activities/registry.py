"""Every activity the worker registers: the engine's, one per activity tool, and capability extras."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

from activities.engine import build_engine_activities
from activities.services import ServicesHolder
from activities.tool_runner import build_tool_activities
from activities.tools.registry import builtin_implementations
from agent_tools.user_tools import UserTool

# Capability modules with activities that are not tools (judge a goal, subscribe to events, ...); each
# exports ``build_activities(holder) -> list``.
EXTRA_ACTIVITY_MODULES: tuple[str, ...] = (
    "activities.planning",
    "activities.delegation",
    "activities.events",
    "activities.research",
)


def all_activities(holder: ServicesHolder, user_tools: Sequence[UserTool] = ()) -> list[Callable[..., Any]]:
    acts = build_engine_activities(holder)
    acts += build_tool_activities(holder, builtin_implementations(), user_tools)
    for name in EXTRA_ACTIVITY_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        acts += module.build_activities(holder)
    return acts
