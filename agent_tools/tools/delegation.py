"""Delegation contracts: subAgent family, invoke_sub_agent, spawn_agent, hand_off_to_agent. Filled by the
delegation issue."""

from __future__ import annotations

from pydantic import BaseModel

from agent_tools.catalog.spec import ToolSpec


class DelegationState(BaseModel):
    """Children of this session."""


TOOLS: list[ToolSpec] = []
