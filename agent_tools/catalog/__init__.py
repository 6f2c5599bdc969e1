"""Tool catalog: contracts, levels and profiles."""

from agent_tools.catalog.profiles import PROFILES
from agent_tools.catalog.registry import ToolCatalog, builtin_specs
from agent_tools.catalog.spec import ToolLevel, ToolSpec

__all__ = ["PROFILES", "ToolCatalog", "ToolLevel", "ToolSpec", "builtin_specs"]
