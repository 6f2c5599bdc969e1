"""Worker-side services every activity shares: settings, store, HTTP client, model provider, catalog, agents,
and the capability engines (web, memory, sandbox, MCP), each built on first use."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from agent_tools._activity_io import SessionRef
from agent_tools._agents import AgentRegistry
from agent_tools._catalog.registry import ToolCatalog
from agent_tools._messages import Message
from agent_tools._settings import Settings
from agent_tools._store.db import Store
from agent_tools._store.transcripts import TranscriptStore
from agent_tools.activities._providers.base import ModelProvider

if TYPE_CHECKING:
    # Imported where first built: a worker that never searches, remembers or runs code loads none of them.
    from agent_tools._web.probe import SearchProbe
    from agent_tools._web.service import WebService
    from agent_tools.activities._mcp.client import McpConnections
    from agent_tools.activities._memory import MemoryEngine
    from agent_tools.activities._sandbox.engine import SandboxEngine
    from agent_tools.contracts._results.readers import LineView

# Extra system text for the model, built per step from the session and the transcript the step sends (the
# Memory Context block is one). The capabilities' hooks come from whoever opens the services (the plugin
# passes the registry's), so that this module imports no capability module.
ContextHook = Callable[["Services", SessionRef, list[Message]], Awaitable[str | None]]


@dataclass
class Services:
    """What the activities of one worker share. The capability engines are built on first use and closed
    with the services; the caches live as long as the worker."""

    settings: Settings
    store: Store
    transcripts: TranscriptStore
    http: httpx.AsyncClient
    providers: ModelProvider
    catalog: ToolCatalog
    agents: AgentRegistry
    context_hooks: list[ContextHook] = field(default_factory=list)
    # Line views of saved results, by artifact ref (the readers page through the same few artifacts).
    result_views: OrderedDict[str, LineView] = field(default_factory=OrderedDict)
    # The Memory Context block, by (session, run, position of the user message it answers).
    memory_context: OrderedDict[tuple[str, str, int], str | None] = field(default_factory=OrderedDict)
    _web: WebService | None = field(default=None, init=False, repr=False)
    _memory: MemoryEngine | None = field(default=None, init=False, repr=False)
    _sandbox: SandboxEngine | None = field(default=None, init=False, repr=False)
    _mcp: McpConnections | None = field(default=None, init=False, repr=False)
    _search_probe: SearchProbe | None = field(default=None, init=False, repr=False)
    _probing: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    @property
    def web(self) -> WebService:
        """Search engines with failover, the guarded fetcher, extraction and the SQL cache."""
        if self._web is None:
            from agent_tools._web.service import WebService

            self._web = WebService(self.settings.web, self.store)
        return self._web

    @property
    def search_probe(self) -> SearchProbe:
        """Whether a configured search engine answers this worker (the search tools are offered only then)."""
        if self._search_probe is None:
            from agent_tools._web.probe import SearchProbe

            self._search_probe = SearchProbe(self.settings.web, self.http)
        return self._search_probe

    def start_probing(self) -> None:
        """Probe the search engines now and every ``web.probe_interval_s`` until the services close."""
        if self._probing is None and self.search_probe.configured:
            self._probing = asyncio.create_task(self.search_probe.run(), name="search-engine-probe")

    @property
    def memory(self) -> MemoryEngine:
        """The memories of every scope this worker serves."""
        if self._memory is None:
            from agent_tools.activities._memory import MemoryEngine

            self._memory = MemoryEngine(self.store, self.settings.memory, http=self.http)
        return self._memory

    @property
    def sandbox(self) -> SandboxEngine:
        """``exec_python``'s engine (its sandbox is probed once per process)."""
        if self._sandbox is None:
            from agent_tools.activities._sandbox.engine import SandboxEngine, protected_paths

            self._sandbox = SandboxEngine(self.settings.sandbox, protected=protected_paths(self.settings))
        return self._sandbox

    @property
    def mcp(self) -> McpConnections:
        """The worker's open MCP sessions, one per server."""
        if self._mcp is None:
            from agent_tools.activities._mcp.client import McpConnections

            self._mcp = McpConnections()
        return self._mcp

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        catalog: ToolCatalog | None = None,
        agents: AgentRegistry | None = None,
        providers: ModelProvider | None = None,
        create_schema: bool = True,
        context_hooks: Sequence[ContextHook] = (),
    ) -> Services:
        """Open the store (creating or migrating its schema) and the HTTP client.

        ``providers`` answers every model call; the default is the registry of ``settings`` over the
        worker's HTTP client. ``context_hooks`` add system text at each model step (a worker's are
        :func:`~agent_tools.activities._registry.builtin_context_hooks`); there are none by default.
        """
        # Agents first: a bad agents.toml fails before anything is opened that would then leak.
        agents = agents or AgentRegistry.from_file(settings.agents_file)
        catalog = catalog or ToolCatalog.builtin()
        store = Store(settings.database_url)
        try:
            if create_schema:
                await store.create_schema()
        except BaseException:
            await store.close()
            raise
        # Temporal's retry policy is the only retry layer: the HTTP client retries nothing itself.
        http = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.llm_timeout_seconds, connect=10.0),
            transport=httpx.AsyncHTTPTransport(retries=0),
            follow_redirects=False,
        )
        if providers is None:
            from agent_tools.activities._providers.registry import ProviderRegistry

            providers = ProviderRegistry(settings, http)
        return cls(
            settings=settings,
            store=store,
            transcripts=TranscriptStore(store),
            http=http,
            providers=providers,
            catalog=catalog,
            agents=agents,
            context_hooks=list(context_hooks),
        )

    async def close(self) -> None:
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probing
            self._probing = None
        for engine in (self._web, self._mcp):
            if engine is not None:
                await engine.aclose()
        self._web = self._mcp = None
        self._memory = self._sandbox = None
        await self.http.aclose()
        await self.store.close()


class ServicesHolder:
    """The worker's services, opened on first use (the Replayer never needs them) and closed with the worker.

    The one dependency every activity class is built with: constructing one opens nothing.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        catalog: ToolCatalog,
        agents: AgentRegistry | None = None,
        providers: ModelProvider | None = None,
        services: Services | None = None,
        context_hooks: Sequence[ContextHook] = (),
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self.agents = agents
        self.providers = providers
        self.context_hooks = context_hooks
        self._services = services
        self._owned = services is None
        self._lock = asyncio.Lock()

    async def get(self) -> Services:
        if self._services is None:
            async with self._lock:
                if self._services is None:
                    self._services = await Services.open(
                        self.settings,
                        catalog=self.catalog,
                        agents=self.agents,
                        providers=self.providers,
                        context_hooks=self.context_hooks,
                    )
        return self._services

    async def close(self) -> None:
        if self._services is not None and self._owned:
            await self._services.close()
            self._services = None


class ActivityClass:
    """Base of the activity classes (one per capability, their methods the activities): built once by the
    plugin with the worker's services, which open on first use."""

    def __init__(self, services: ServicesHolder) -> None:
        self._services = services
