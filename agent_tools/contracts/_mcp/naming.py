"""Catalog names of MCP tools: ``mcp__<server>__<tool>``.

Model APIs accept function names matching ``^[a-zA-Z0-9_-]{1,64}$``; MCP tool names may hold dots, slashes
or spaces and be longer. Such a name has its other characters replaced by ``_``, is cut to fit, and ends in a
short hash of the original, so that ``a.b`` and ``a_b`` stay distinct and a tool always gets the same name.
"""

from __future__ import annotations

import hashlib
import re

MAX_TOOL_NAME = 64
PREFIX = "mcp"
_INVALID = re.compile(r"[^A-Za-z0-9_\-]")


def catalog_tool_name(server: str, tool: str) -> str:
    """The name the model calls for ``tool`` of ``server``."""
    raw = f"{PREFIX}__{server}__{tool}"
    name = _INVALID.sub("_", raw)
    if name == raw and len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{name[: MAX_TOOL_NAME - 9]}_{digest}"
