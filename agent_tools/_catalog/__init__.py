"""Tool catalog: contracts, levels and profiles."""

from agent_tools._catalog.profiles import PROFILES
from agent_tools._catalog.registry import ToolCatalog, builtin_specs
from agent_tools._catalog.spec import ToolLevel, ToolSpec

__all__ = ["PROFILES", "ToolCatalog", "ToolLevel", "ToolSpec", "builtin_specs"]
