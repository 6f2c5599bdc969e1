"""Human-in-the-loop contracts: askUser (RTC). Filled by the human-in-the-loop issue."""

from __future__ import annotations

from pydantic import BaseModel

from agent_tools.catalog.spec import ToolSpec


class HumanState(BaseModel):
    """Pending questions and recorded answers."""


TOOLS: list[ToolSpec] = []
