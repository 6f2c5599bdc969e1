"""Worker-side services every activity shares: settings, store, HTTP client, providers, catalog, agents."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_tools.activities.providers.registry import ProviderRegistry
from agent_tools.activities.store.db import Store
from agent_tools.activities.store.transcripts import TranscriptStore
from agent_tools.activity_io import SessionRef
from agent_tools.agents import AgentRegistry
from agent_tools.catalog.registry import ToolCatalog
from agent_tools.messages import Message
from agent_tools.settings import Settings

# Extra system text for the model, built per step from the session and the transcript the step sends (the
# Memory Context block is one).
ContextHook = Callable[["Services", SessionRef, list[Message]], Awaitable[str | None]]


@dataclass
class Services:
    settings: Settings
    store: Store
    transcripts: TranscriptStore
    http: httpx.AsyncClient
    providers: ProviderRegistry
    catalog: ToolCatalog
    agents: AgentRegistry
    context_hooks: list[ContextHook] = field(default_factory=list)
    # Capability engines (web, memory, ...) created on first use and shared by every activity.
    engines: dict[str, Any] = field(default_factory=dict)

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        catalog: ToolCatalog | None = None,
        agents: AgentRegistry | None = None,
        create_schema: bool = True,
    ) -> Services:
        # Agents first: a bad agents.toml fails before anything is opened that would then leak.
        agents = agents or AgentRegistry.from_file(settings.agents_file)
        catalog = catalog or ToolCatalog.builtin()
        # Imported here: the capability modules the registry names import this module.
        from agent_tools.activities.registry import builtin_context_hooks

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
        return cls(
            settings=settings,
            store=store,
            transcripts=TranscriptStore(store),
            http=http,
            providers=ProviderRegistry(settings, http),
            catalog=catalog,
            agents=agents,
            context_hooks=builtin_context_hooks(),
        )

    async def close(self) -> None:
        for engine in self.engines.values():
            closer = getattr(engine, "aclose", None)
            if closer is not None:
                await closer()
        await self.http.aclose()
        await self.store.close()


class ServicesHolder:
    """Opens the services on first use (the Replayer never needs them) and closes them with the worker."""

    def __init__(
        self,
        settings: Settings,
        *,
        catalog: ToolCatalog,
        agents: AgentRegistry | None = None,
        services: Services | None = None,
    ) -> None:
        import asyncio

        self.settings = settings
        self.catalog = catalog
        self.agents = agents
        self._services = services
        self._owned = services is None
        self._lock = asyncio.Lock()

    async def get(self) -> Services:
        if self._services is None:
            async with self._lock:
                if self._services is None:
                    self._services = await Services.open(self.settings, catalog=self.catalog, agents=self.agents)
        return self._services

    async def close(self) -> None:
        if self._services is not None and self._owned:
            await self._services.close()
            self._services = None
