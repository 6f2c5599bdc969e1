"""Event contracts: wait_for_event (FYAI). Filled by the events issue."""

from __future__ import annotations

from pydantic import BaseModel

from agent_tools.catalog.spec import ToolSpec


class EventWaitState(BaseModel):
    """Subscriptions this session waits on."""


TOOLS: list[ToolSpec] = []
