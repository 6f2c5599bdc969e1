"""Client faces of the web capability: standalone search/fetch and deep_research jobs.

    tools = client.tools                      # ToolsClient
    res = await tools.search({"query": "react compiler release", "include_domains": ["react.dev"]})
    page = await tools.fetch({"url": "https://nodejs.org/en/blog", "focus": "ESM loader hooks"})

    job = await client.research.create({"question": "Which EU countries require B2B e-invoicing in 2026?"})
    job = await client.research.wait(job.id, timeout_s=55)     # status, report, sources
    job = await client.research.run({"question": "...", "max_sources": 15})

Search and fetch run the same engine the workers use, in this process, against the shared SQL cache (no
Temporal round trip: they are single requests). Research jobs are ``DeepResearch`` workflows.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from agent_tools._errors import AgentToolsError, StoreNotReady, WebError
from agent_tools._settings import Settings
from agent_tools.contracts._web.models import (
    RESEARCH_WORKFLOW,
    FetchResponse,
    ResearchJob,
    ResearchRequest,
    SearchResponse,
    WebFetchArgs,
    WebSearchArgs,
)

if TYPE_CHECKING:
    from agent_tools._client import AgentToolsClient
    from agent_tools._store.db import SharedStore, Store
    from agent_tools._web.service import WebService

__all__ = [
    "ResearchClient",
    "ToolsClient",
    "WebToolError",
    "validate_output_schema",
]

log = logging.getLogger(__name__)


class WebToolError(AgentToolsError):
    """A search or fetch that was refused or failed; ``code`` and ``status`` as the HTTP API has them."""

    def __init__(self, code: str, message: str, *, status: int, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.status = status
        self.details = details or {}


class ToolsClient:
    """``search`` and ``fetch`` with the ``/v1/tools`` request and response shapes.

    The engine (its HTTP client, and the store that holds the shared cache) opens on the first call and stays
    open until :meth:`aclose`; ``AgentToolsClient.close`` closes the one it hands out. Made from a client, it
    reads through that client's store. A client never creates or migrates the store: when no worker (or
    ``agent-tools migrate``) has created it yet, search and fetch run without the shared cache
    (``cache_available`` is then False).
    """

    def __init__(self, client: AgentToolsClient | None = None, *, settings: Settings | None = None) -> None:
        if settings is None:
            if client is None:
                raise ValueError("ToolsClient needs a client or settings")
            settings = client.settings
        self.settings: Settings = settings
        self._client = client
        self._own_store: SharedStore | None = None
        self._web: WebService | None = None
        self._lock = asyncio.Lock()
        self.cache_available: bool | None = None

    async def _service(self) -> WebService:
        if self._web is None:
            async with self._lock:
                if self._web is None:
                    from agent_tools._store.db import SharedStore
                    from agent_tools._web.service import WebService

                    if self._client is not None:
                        shared = self._client.shared_store()
                    else:
                        shared = self._own_store = SharedStore(self.settings.database_url)
                    store: Store | None
                    try:
                        store = await shared.get()
                    except StoreNotReady as exc:
                        log.warning("web tools run without the shared cache: %s", exc)
                        store = None
                    self.cache_available = store is not None
                    self._web = WebService(self.settings.web, store)
        return self._web

    async def search(self, request: WebSearchArgs | dict[str, Any]) -> SearchResponse:
        """A verified web search, answered as ``POST /v1/tools/search`` answers it.

        Raises:
            WebToolError: the search was refused or no engine answered.
        """
        args = request if isinstance(request, WebSearchArgs) else WebSearchArgs.model_validate(request)
        web = await self._service()
        try:
            return await search_with(web, args)
        except WebError as exc:
            raise WebToolError(exc.code, exc.message, status=exc.http_status, details=exc.details) from exc

    async def fetch(self, request: WebFetchArgs | dict[str, Any]) -> FetchResponse:
        """One page as clean Markdown, answered as ``POST /v1/tools/fetch`` answers it.

        Raises:
            WebToolError: the URL was refused or the page could not be fetched.
        """
        args = request if isinstance(request, WebFetchArgs) else WebFetchArgs.model_validate(request)
        web = await self._service()
        try:
            return await web.web_fetch(args)
        except WebError as exc:
            raise WebToolError(exc.code, exc.message, status=exc.http_status, details=exc.details) from exc

    async def aclose(self) -> None:
        """Close the engine (its HTTP client, and its store unless a client's) if it was opened."""
        if self._web is not None:
            web, self._web = self._web, None
            await web.aclose()
        if self._own_store is not None:
            store, self._own_store = self._own_store, None
            await store.close()

    async def __aenter__(self) -> ToolsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def search_with(web: WebService, args: WebSearchArgs) -> SearchResponse:
    """``args`` searched on ``web``, with the answer's ``intent`` read from the query: the one rendering of
    a search that the client and the HTTP service share."""
    from agent_tools.contracts._web.render import search_intent, search_response

    outcome = await web.web_search(args)
    intent = search_intent(args.query, include_domains=args.include_domains, freshness=args.freshness)
    return search_response(outcome, args.max_results, intent=intent)


def validate_output_schema(schema: dict[str, Any] | None) -> None:
    """Refuse a malformed JSON Schema before a job starts (it would only fail at the end)."""
    if schema is None:
        return
    import jsonschema  # type: ignore[import-untyped]

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"output_schema is not a valid JSON Schema: {exc.message}") from exc


class ResearchClient:
    """deep_research jobs: ``create`` (returns at once), ``retrieve``, ``wait`` (bounded), ``run``."""

    def __init__(self, client: AgentToolsClient) -> None:
        self._client = client

    async def create(self, request: ResearchRequest | dict[str, Any], *, job_id: str | None = None) -> ResearchJob:
        """Start a job and return at once (``status`` is ``running``).

        Raises:
            ValueError: the request's ``output_schema`` is not a valid JSON Schema.
        """
        req = request if isinstance(request, ResearchRequest) else ResearchRequest.model_validate(request)
        validate_output_schema(req.output_schema)
        job_id = job_id or f"research-{uuid.uuid4()}"
        await self._client.temporal.start_workflow(
            RESEARCH_WORKFLOW,
            req,
            id=job_id,
            task_queue=self._client.settings.task_queue,
            static_summary=f"deep_research: {req.question[:80]}",
        )
        return ResearchJob(id=job_id, status="running", question=req.question, phase="starting")

    async def retrieve(self, job_id: str) -> ResearchJob:
        """The job's state now: its result once finished, its phase while running."""
        from temporalio.client import WorkflowExecutionStatus

        handle = self._client.temporal.get_workflow_handle(job_id, result_type=ResearchJob)
        description = await handle.describe()
        if description.status == WorkflowExecutionStatus.COMPLETED:
            result: ResearchJob = await handle.result()
            return result
        if description.status == WorkflowExecutionStatus.RUNNING:
            try:
                status: ResearchJob = await handle.query("status", result_type=ResearchJob)
                return status
            except Exception:
                return ResearchJob(id=job_id, status="running", phase="starting")
        name = description.status.name.lower() if description.status else "unknown"
        return ResearchJob(id=job_id, status="failed", error=f"job {name}")

    async def wait(self, job_id: str, timeout_s: float = 55.0) -> ResearchJob:
        """The finished job, or its current state after ``timeout_s`` seconds."""
        handle = self._client.temporal.get_workflow_handle(job_id, result_type=ResearchJob)
        if timeout_s > 0:
            try:
                result: ResearchJob = await asyncio.wait_for(handle.result(), timeout=timeout_s)
                return result
            except TimeoutError:
                pass
            except Exception:
                pass
        return await self.retrieve(job_id)

    async def run(self, request: ResearchRequest | dict[str, Any]) -> ResearchJob:
        """Create a job and wait for it to finish."""
        job = await self.create(request)
        handle = self._client.temporal.get_workflow_handle(job.id, result_type=ResearchJob)
        result: ResearchJob = await handle.result()
        return result
