"""Shared helpers (no tests here) for the memory / results / history tests: services on a store URL, and calling a tool
through the real runner (validation, spill rules) without Temporal."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from agent_tools._activity_io import SessionRef, ToolCallInput, ToolCallOutput
from agent_tools._agents import AgentDefinition, AgentRegistry
from agent_tools._settings import Settings
from agent_tools.activities._registry import builtin_context_hooks, builtin_implementations
from agent_tools.activities._services import Services
from agent_tools.activities._tool_runner import run_tool


@asynccontextmanager
async def open_services(url: str, agents: list[AgentDefinition] | None = None) -> AsyncIterator[Services]:
    settings = Settings(database_url=url, agents_file=None, model=None, openai_api_key=None, anthropic_api_key=None)
    services = await Services.open(
        settings, agents=AgentRegistry(agents) if agents else None, context_hooks=builtin_context_hooks()
    )
    try:
        yield services
    finally:
        await services.close()


def ref(
    *,
    organisation: str | None = None,
    project: str = "p",
    user: str = "u",
    agent: str = "assistant",
    session_id: str | None = None,
    run_id: str = "run-1",
    spill_threshold: int = 2000,
) -> SessionRef:
    return SessionRef(
        session_id=session_id or f"s-{uuid.uuid4().hex[:8]}",
        run_id=run_id,
        agent=agent,
        organisation=organisation or f"org-{uuid.uuid4().hex[:8]}",
        project=project,
        user=user,
        root_id="root",
        model="scripted:x",
        spill_threshold=spill_threshold,
    )


async def call(
    services: Services, session: SessionRef, name: str, arguments: dict[str, Any], call_id: str | None = None
) -> ToolCallOutput:
    impl = builtin_implementations()[name]
    inp = ToolCallInput(session=session, call_id=call_id or f"c-{uuid.uuid4().hex[:8]}", name=name, arguments=arguments)
    return await run_tool(services, services.catalog.get(name), impl, inp)
