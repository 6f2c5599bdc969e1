"""``AgentToolsPlugin``: the one object that wires Durable Agent Tools into a Temporal Client and Worker.

client = await Client.connect("localhost:7233", plugins=[AgentToolsPlugin()])
worker = Worker(client, task_queue="agent-tools")   # workflows, activities, converter come from the plugin
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agent_tools.agents import AgentRegistry
from agent_tools.catalog.registry import ToolCatalog
from agent_tools.settings import Settings
from agent_tools.user_tools import UserTool, make_user_tool

# The session's capability mixins and their helpers: deterministic workflow code that defines no workflow
# class, and whose only module-level state is filled once at import (NATIVE_TOOLS, by decorators).
# tests/test_architecture.py checks that they define and import no workflow class, and checks all workflow
# code for non-deterministic calls and ``global``, which the sandbox no longer sees here. Re-importing
# them on every run measured as 40% of the session workflow's start-up CPU; only the modules that define
# workflow classes (``workflows.session``, ``workflows.research``, ``workflows.event_router``) are loaded
# afresh per run.
WORKFLOW_HELPER_MODULES = (
    "workflows.base",
    "workflows.native",
    "workflows.human",
    "workflows.planning",
    "workflows.delegation",
    "workflows.events",
)

# Modules the workflow sandbox shares with the worker instead of re-importing them for every workflow run:
# they are pure (no I/O, no global mutation at call time), and re-importing pydantic models per run is the
# single largest CPU cost an agent workflow can have.
PASSTHROUGH_MODULES = (
    "agent_tools",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
    "yaml",
    # Stateless at module level (its state lives on the WorkflowStream instance); sharing it spares a
    # re-import of its dataclasses on every workflow run.
    "temporalio.contrib.workflow_streams",
    *WORKFLOW_HELPER_MODULES,
)


def workflow_runner() -> WorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES)
    )


def ensure_workflow_bytecode() -> None:
    """Write the workflow modules' bytecode if it is missing.

    The sandbox imports the workflow modules afresh for every workflow run. Without cached bytecode (an
    environment with PYTHONDONTWRITEBYTECODE, a fresh checkout) each run compiles them from source again,
    which measured as the largest share of the engine's CPU per session. ``compileall`` writes the cache
    regardless of that setting; afterwards every run loads bytecode.
    """
    import compileall

    import workflows

    for folder in workflows.__path__:
        compileall.compile_dir(folder, quiet=2, workers=1)


class AgentToolsPlugin(SimplePlugin):
    """Registers the session workflows, every tool activity, the pydantic data converter and the sandbox
    passthrough; opens the worker's services (store, HTTP client, providers) on first use.

    Args:
        settings: Deployment settings; read from the environment when omitted.
        tools: The user's own tools (async functions or :func:`agent_tools.tool` objects).
        agents: Agent definitions; read from ``settings.agents_file`` when omitted.
        services: Pre-opened services (tests share one store across workers).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        tools: Sequence[UserTool | Callable[..., Any]] = (),
        agents: AgentRegistry | None = None,
        services: Any | None = None,
    ) -> None:
        # Imported here so that `import agent_tools` stays light for workflow sandboxes and clients.
        from activities.registry import all_activities
        from activities.services import ServicesHolder
        from workflows.registry import all_workflows

        self.settings = settings or Settings()
        self.user_tools = [t if isinstance(t, UserTool) else make_user_tool(t) for t in tools]
        self.catalog = ToolCatalog.builtin()
        for ut in self.user_tools:
            self.catalog.register(ut.spec)
        self.holder = ServicesHolder(self.settings, catalog=self.catalog, agents=agents, services=services)

        @asynccontextmanager
        async def run_context() -> AsyncIterator[None]:
            ensure_workflow_bytecode()
            try:
                yield
            finally:
                await self.holder.close()

        super().__init__(
            "durable-agent-tools",
            data_converter=pydantic_data_converter,
            activities=all_activities(self.holder, self.user_tools),
            workflows=all_workflows(),
            workflow_runner=workflow_runner(),
            run_context=run_context,
        )

    @classmethod
    async def create(
        cls,
        settings: Settings | None = None,
        *,
        tools: Sequence[UserTool | Callable[..., Any]] = (),
        agents: AgentRegistry | None = None,
    ) -> AgentToolsPlugin:
        """The plugin plus the tools of the MCP servers in ``settings.mcp_config_file``, discovered now.

        A server that cannot be reached is logged and skipped: the worker starts without its tools.
        """
        from activities.mcp.discovery import mcp_user_tools
        from agent_tools.mcp.config import McpConfig

        settings = settings or Settings()
        mcp_tools = await mcp_user_tools(McpConfig.from_file(settings.mcp_config_file))
        return cls(settings, tools=[*tools, *mcp_tools], agents=agents)
