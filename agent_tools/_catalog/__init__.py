"""Tool catalog: contracts, levels and profiles.

The names load lazily: a contract module that needs only ``ToolSpec`` (``agent_tools._catalog.spec``) must
not pull in the registry, which imports every tool's contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_tools._lazy import lazy_names

__all__ = ["PROFILES", "ToolCatalog", "ToolLevel", "ToolSpec", "builtin_specs"]

_LAZY = {
    "PROFILES": "agent_tools._catalog.profiles",
    "ToolCatalog": "agent_tools._catalog.registry",
    "builtin_specs": "agent_tools._catalog.registry",
    "ToolLevel": "agent_tools._catalog.spec",
    "ToolSpec": "agent_tools._catalog.spec",
}

if TYPE_CHECKING:
    from agent_tools._catalog.profiles import PROFILES
    from agent_tools._catalog.registry import ToolCatalog, builtin_specs
    from agent_tools._catalog.spec import ToolLevel, ToolSpec

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
