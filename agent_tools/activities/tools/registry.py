"""Built-in activity tool implementations, collected from the capability modules' ``IMPLEMENTATIONS``."""

from __future__ import annotations

from types import ModuleType

from agent_tools.activities.services import ContextHook
from agent_tools.activities.tools.base import ToolImpl
from agent_tools.modules import present_modules

IMPLEMENTATION_MODULES: tuple[str, ...] = (
    "agent_tools.activities.tools.history",
    "agent_tools.activities.tools.web",
    "agent_tools.activities.tools.memory",
    "agent_tools.activities.tools.results",
    "agent_tools.activities.tools.delegation",
    "agent_tools.activities.tools.events",
    "agent_tools.activities.sandbox",
    "agent_tools.activities.tools.skills",
)


def _modules() -> list[ModuleType]:
    return present_modules(IMPLEMENTATION_MODULES)


def builtin_context_hooks() -> list[ContextHook]:
    """Per-step system text providers (the Memory Context block) from capability modules' ``CONTEXT_HOOKS``."""
    hooks: list[ContextHook] = []
    for module in _modules():
        hooks.extend(getattr(module, "CONTEXT_HOOKS", ()))
    return hooks


def builtin_implementations() -> dict[str, ToolImpl]:
    impls: dict[str, ToolImpl] = {}
    for module in _modules():
        impls.update(getattr(module, "IMPLEMENTATIONS", {}))
    return impls
