"""``AgentToolsPlugin``: the one object that wires Durable Agent Tools into a Temporal client and worker.

client = await Client.connect("localhost:7233", plugins=[AgentToolsPlugin()])
worker = Worker(client, task_queue="agent-tools")   # the session workflows and tool activities come along

The plugin composes with what the host application configured instead of replacing it:

* **data converter**: the host's payload codec (encryption, compression) and failure converter stay; only
  the payload converter becomes pydantic's, which the engine's models need. A host payload converter that
  is neither the default nor pydantic's is kept as it is (see :func:`compose_data_converter`).
* **workflow runner**: the engine's workflows run unsandboxed; a host's sandboxed runner keeps its
  restrictions and gains the passthrough its own workflows need to import our models; an unsandboxed or
  custom runner is left alone.
* **registration**: only workers on the task queues that serve agent sessions (``settings.task_queue`` by
  default) get our workflows and activities; ``register_workflows`` / ``register_activities`` split them
  so that model keys and database credentials need not sit on every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from temporalio.client import Client, ClientConfig
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkerConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from agent_tools._agents import AgentRegistry
from agent_tools._catalog.registry import ToolCatalog
from agent_tools._connection import compose_data_converter
from agent_tools._policy import ExecutionPolicy
from agent_tools._settings import Settings
from agent_tools._user_tools import UserTool, make_user_tool

if TYPE_CHECKING:
    from agent_tools.activities._providers.base import ModelProvider
    from agent_tools.activities._services import Services, ServicesHolder

__all__ = [
    "PASSTHROUGH_MODULES",
    "AgentToolsPlugin",
    "compose_data_converter",
    "compose_workflow_runner",
]

log = logging.getLogger(__name__)

# What a host's own sandboxed workflow shares with the worker when it imports our models (to start a session
# as its child, say): the engine's workflows run unsandboxed, so nothing of ours needs re-importing per run,
# and one pydantic keeps one class per model on both sides of the sandbox.
PASSTHROUGH_MODULES = ("agent_tools", "pydantic", "pydantic_core", "annotated_types", "typing_inspection")


def compose_workflow_runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    """The host's sandbox with our passthrough modules added (its workflows may import our models); any other
    runner unchanged."""
    if existing is None:
        return SandboxedWorkflowRunner(
            restrictions=SandboxedWorkflowRunner().restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
        )
    if isinstance(existing, SandboxedWorkflowRunner):
        return dataclasses.replace(
            existing, restrictions=existing.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
        )
    return existing


def _import_httpx_without_its_cli() -> None:
    """Import httpx without ``httpx._main``, its command line, which ``import httpx`` loads whenever rich and
    click are installed (our CLI's typer brings both): a worker would carry rich, click and pygments for a
    ``main`` it never calls. Only ``httpx.main`` becomes httpx's stub; ``httpx._main`` imports as usual after."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    sys.modules["httpx._main"] = None  # type: ignore[assignment]  # the import fails: httpx defines its stub
    try:
        import httpx  # noqa: F401
    finally:
        if sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]


class AgentToolsPlugin(SimplePlugin):
    """Registers the session workflows and every tool activity on the workers that serve agent sessions,
    composes the client's data converter with pydantic's payload converter, and opens the worker's services
    (store, HTTP client, providers) on first use.

    Args:
        settings: Deployment settings; read from the environment when omitted.
        tools: The user's own tools (async functions or :func:`agent_tools.tool` objects).
        agents: Agent definitions; read from ``settings.agents_file`` when omitted.
        policy: Timeouts and retry policies of model steps, tool calls, engine activities and child
            sessions; ``settings.policy`` when omitted.
        task_queues: The task queues whose workers serve agent sessions; ``[settings.task_queue]`` when
            omitted. A worker on any other queue gets nothing from this plugin.
        register_workflows: Register the engine's workflows on those workers.
        register_activities: Register the engine's activities (model calls, tools, stores) on those workers.
        services: Pre-opened services (tests share one store across workers); the plugin neither opens
            nor closes them.
        model_provider: Answers every model call of the worker's activities (session steps, the goal
            judge, delegate_to_model, research): an object with ``resolve(spec) -> (provider, model)`` and
            ``check(spec)`` (:class:`~agent_tools.activities._providers.base.ModelProvider`), as
            ``OpenAIAgentsPlugin(model_provider=...)`` takes one. The default resolves ``openai:``,
            ``anthropic:``, ``ollama:``, ``scripted:`` and ``settings.providers`` over the worker's HTTP
            client; :class:`agent_tools.testing.FunctionModel` answers from a Python function in-process.
            Ignored with ``services``, which bring their own.

    The worker's activities are methods of one class per capability, built once here with the services
    as their dependency; the services (store, HTTP client, provider) open when the worker starts, and the
    capability engines (web, memory, sandbox, MCP) on their first call. A ``Replayer`` opens nothing.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        tools: Sequence[UserTool | Callable[..., Any]] = (),
        agents: AgentRegistry | None = None,
        policy: ExecutionPolicy | None = None,
        task_queues: Sequence[str] | None = None,
        register_workflows: bool = True,
        register_activities: bool = True,
        services: Services | None = None,
        model_provider: ModelProvider | None = None,
    ) -> None:
        settings = settings or Settings()
        if policy is not None:
            settings = settings.model_copy(update={"policy": policy})
        self.settings = settings
        self.task_queues = frozenset(task_queues if task_queues is not None else [settings.task_queue])
        self.register_workflows = register_workflows
        self.register_activities = register_activities
        self.user_tools = [t if isinstance(t, UserTool) else make_user_tool(t) for t in tools]
        self.catalog = ToolCatalog.builtin()
        for ut in self.user_tools:
            self.catalog.register(ut.spec)
        self._agents = agents
        self._services = services
        self._model_provider = model_provider
        self._holder: ServicesHolder | None = None
        self._attributes_checked: set[tuple[str, str]] = set()
        interceptors: list[Any] = []
        self._tracing_interceptor: object | None = None
        if settings.tracing:
            from agent_tools import _tracing as tracing

            # On the client, so workers built on it get it too: the trace context then rides on every
            # workflow start, activity, child workflow and signal (agent_tools._tracing).
            self._tracing_interceptor = tracing.interceptor()
            interceptors.append(self._tracing_interceptor)
        super().__init__(
            "durable-agent-tools",
            data_converter=compose_data_converter,
            interceptors=interceptors or None,
            workflows=self._workflows if register_workflows else None,
            activities=self._activities if register_activities else None,
            workflow_runner=compose_workflow_runner if register_workflows else None,
        )

    # ---- what a serving worker gets -------------------------------------------------------------------

    @property
    def holder(self) -> ServicesHolder:
        """The worker-side services (store, HTTP client, providers), opened on first use."""
        if self._holder is None:
            # Imported here so that `import agent_tools` stays light for clients.
            _import_httpx_without_its_cli()
            from agent_tools.activities._registry import builtin_context_hooks
            from agent_tools.activities._services import ServicesHolder

            self._holder = ServicesHolder(
                self.settings,
                catalog=self.catalog,
                agents=self._agents,
                providers=self._model_provider,
                services=self._services,
                context_hooks=builtin_context_hooks(),
            )
        return self._holder

    def _workflows(self, existing: Sequence[type] | None) -> Sequence[type]:
        from agent_tools.workflows._registry import all_workflows

        return [*(existing or []), *all_workflows()]

    def _activities(self, existing: Sequence[Callable[..., Any]] | None) -> Sequence[Callable[..., Any]]:
        _import_httpx_without_its_cli()
        from agent_tools.activities._registry import all_activities

        return [*(existing or []), *all_activities(self.holder, self.user_tools)]

    def serves(self, task_queue: str | None) -> bool:
        """Whether a worker on ``task_queue`` serves agent sessions (and so gets our registrations)."""
        return task_queue in self.task_queues

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        config = super().configure_client(config)
        config["interceptors"] = self._without_second_tracer(config.get("interceptors") or [])
        return config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        if not self.serves(config.get("task_queue")):
            return config
        config = super().configure_worker(config)
        config["interceptors"] = self._without_second_tracer(config.get("interceptors") or [])
        return config

    def _without_second_tracer(self, interceptors: Sequence[Any]) -> list[Any]:
        """The host's OpenTelemetry interceptor wins over ours: two would each attach the context they carry,
        and the inner one would take spans out from under the outer one's (``RunActivity``, say)."""
        ours = self._tracing_interceptor
        if ours is None:
            return list(interceptors)
        from agent_tools import _tracing as tracing

        if any(tracing.is_tracing_interceptor(i) and i is not ours for i in interceptors):
            return [i for i in interceptors if i is not ours]
        return list(interceptors)

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        if not self.serves(worker.task_queue):
            await next(worker)
            return
        async with self._serving(worker):
            await next(worker)

    @asynccontextmanager
    async def _serving(self, worker: Worker) -> AsyncIterator[None]:
        if self.register_workflows and self.settings.search_attributes:
            await self.ensure_search_attributes(worker.client)
        if self.register_activities:
            # Open the services (and create or migrate the store) before the first task: clients never
            # create the store, so it must exist once a worker runs; a bad database URL fails here, once.
            services = await self.holder.get()
            # Probe the exec_python sandbox as the worker starts, so the log says early whether (and why not) it
            # is offered; beside the first tasks, not before them (the probe runs two interpreters), and a
            # session's first exec_python waits for the same cached probe. The search engines too, now and then
            # every web.probe_interval_s (the search tools follow it).
            services.start_probing()
        announcing = (
            asyncio.create_task(self._announce(), name="sandbox-announce") if self.register_activities else None
        )
        try:
            yield
        finally:
            if announcing is not None and not announcing.done():
                announcing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await announcing
            if self._holder is not None:
                await self._holder.close()

    async def _announce(self) -> None:
        from agent_tools.activities._sandbox.tool import announce

        try:
            await announce(await self.holder.get())
        except Exception:  # a log line at start must never stop a worker
            log.exception("probing the exec_python sandbox failed")

    async def ensure_search_attributes(self, client: Client) -> None:
        """Register the session search attributes on ``client``'s namespace if it lacks them (once).

        Raises:
            ConfigurationError: they are missing and cannot be created; the message has the commands.
        """
        key = (client.service_client.config.target_host, client.namespace)
        if key in self._attributes_checked:
            return
        from agent_tools import _search_attributes as sa

        added = await sa.ensure_registered(client)
        if added:
            log.info("registered search attributes %s on namespace %s", ", ".join(added), client.namespace)
        self._attributes_checked.add(key)

    @classmethod
    async def create(
        cls,
        settings: Settings | None = None,
        *,
        tools: Sequence[UserTool | Callable[..., Any]] = (),
        agents: AgentRegistry | None = None,
        **kwargs: Any,
    ) -> AgentToolsPlugin:
        """The plugin plus the tools of the MCP servers in ``settings.mcp_config_file``, discovered now.

        A server that cannot be reached is logged and skipped: the worker starts without its tools.
        """
        from agent_tools.activities._mcp.discovery import mcp_user_tools
        from agent_tools.contracts._mcp.config import McpConfig

        settings = settings or Settings()
        mcp_tools = await mcp_user_tools(McpConfig.from_file(settings.mcp_config_file))
        return cls(settings, tools=[*tools, *mcp_tools], agents=agents, **kwargs)
