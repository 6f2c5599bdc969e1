"""Arguments and results of every web face, plus the engine-neutral search hit and fetched page.

The same models are the tool contracts (:mod:`agent_tools.contracts._web`), the HTTP endpoints' request and
response bodies (:mod:`agent_tools._service.tools_routes`) and the client's return values, so the three can
never drift apart.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator

from agent_tools._boundaries import limit
from agent_tools._messages import Usage

TimeRange = Literal["day", "week", "month", "year"]


DATE_PATTERN = r"^(\d{4}-\d{2}-\d{2})?$"
"""A date as the schema states it (empty: no date); ``_check_date`` then checks it is a real day."""


# In the schema for the model; _check_date enforces it (with a message that names the form).
DATE_LIMITS: dict[str, str | int] = {"maxLength": 10, "pattern": DATE_PATTERN}


def _check_date(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    try:
        if not re.fullmatch(DATE_PATTERN, value):
            raise ValueError(value)
        dt.date.fromisoformat(value)
    except ValueError as exc:
        raise ValueError("must be a date in YYYY-MM-DD form") from exc
    return value


def _check_domains(value: list[str] | None) -> list[str] | None:
    if value is None:
        return None
    cleaned = [v.strip() for v in value if v and v.strip()]
    if len(cleaned) > 10:
        raise ValueError("at most 10 hosts")
    for v in cleaned:
        if " " in v or len(v) > 253:
            raise ValueError(f"{v!r} is not a host (optionally with a path prefix)")
    return cleaned


# --- engine-neutral ---------------------------------------------------------------------------------


class SearchHit(BaseModel):
    """One normalised search result, whichever engine found it."""

    title: str
    url: str
    snippet: str = ""
    source: str = Field(description="engine that returned it")
    published_at: str | None = Field(default=None, description="ISO 8601 when the engine knew it; never guessed")
    content: str | None = Field(default=None, description="verified excerpt of the live page (content_chars)")
    verified: bool = Field(default=False, description="the snippet was found on the live page")
    crawled_at: str | None = Field(default=None, description="when this service fetched the page to verify it")


class EngineFailure(BaseModel):
    engine: str
    reason: str


class SearchOutcome(BaseModel):
    """What the engine layer returns: results plus which engines were asked and which failed."""

    query: str
    results: list[SearchHit] = Field(default_factory=list)
    engines_tried: list[str] = Field(default_factory=list)
    engines_failed: list[EngineFailure] = Field(default_factory=list)
    engines_skipped: list[str] = Field(default_factory=list, description="circuit breaker open")
    secondary: list[SearchHit] = Field(default_factory=list, description="second engine group ([G1]..[Gn])")
    secondary_engines: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    took_ms: int = 0
    cached: bool = False


class Fetched(BaseModel):
    """Where a page came from: the URL asked for, the one that answered, its status and type."""

    url: str
    final_url: str
    status: int
    content_type: str


class Extracted(BaseModel):
    """A document's text as Markdown, with the metadata extraction found."""

    title: str | None = None
    byline: str | None = None
    description: str | None = None
    canonical: str | None = None
    lang: str | None = None
    published_at: str | None = None
    markdown: str = ""
    extractor: str = Field(default="none", description="trafilatura | fallback | plain | json")


class Page(Extracted, Fetched):
    """A fetched and extracted page, as the pipeline caches it (the fields of :class:`Fetched`, then of
    :class:`Extracted`, then these)."""

    bytes: int = 0
    body_truncated: bool = False
    fetched_at: str = ""
    redirect_to: str | None = Field(default=None, description="a redirect that was not followed (other host)")


# --- RTC faces: webSearch / webFetch ----------------------------------------------------------------


class WebSearchRtcArgs(BaseModel):
    query: str = Field(min_length=1, max_length=400, description="The search query. Be specific.")
    max_results: int = Field(default=10, ge=1, le=30, description="Maximum results (default 10, max 30)")
    # RTC: "Leave empty for all time": "" is accepted (and shown in the enum) and means no time filter.
    time_range: Literal["day", "week", "month", "year", ""] | None = Field(
        default=None, description='day, week, month or year; empty ("") for all time'
    )

    @field_validator("query")
    @classmethod
    def _trim(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("query is empty")
        return v

    @field_validator("time_range")
    @classmethod
    def _all_time(cls, v: str | None) -> str | None:
        return v or None


class RtcSearchResult(BaseModel):
    title: str
    url: str
    description: str
    source: str


class WebSearchRtcResult(BaseModel):
    query: str
    result_count: int
    results: list[RtcSearchResult]


class WebFetchRtcArgs(BaseModel):
    url: str = Field(max_length=2000, description="Fully-formed http(s) URL to fetch")
    prompt: str = Field(min_length=1, max_length=10_000, description="What to extract from the page")


class WebFetchRtcResult(BaseModel):
    url: str
    final_url: str | None = None
    status_code: int | None = None
    content_type: str | None = None
    bytes: int = 0
    extracted_by: Literal["none", "model"] = "none"
    redirect_url: str | None = None
    cached: bool = False
    content: str = ""


# --- codai faces: web_search / web_fetch / http_fetch / json_query / deep_research --------------------


# A host name, optionally with a path prefix (253 is DNS's limit for a name).
Domain = Annotated[str, Field(**limit(chars=300))]


class WebSearchArgs(BaseModel):
    """``web_search`` and ``POST /v1/tools/search``."""

    query: str = Field(
        description="Trimmed, 1-400 characters. Operators: site:, -site:, filetype:, intitle:, "
        'inurl:, "exact phrase", -term, A OR B, after:, before:, lang:xx',
        min_length=1,
        **limit(chars=400),
    )
    max_results: int = Field(default=5, ge=1, le=10)
    include_domains: list[Domain] | None = Field(
        default=None, description="Up to 10 hosts (subdomains included, optional path prefix)", **limit(items=10)
    )
    exclude_domains: list[Domain] | None = Field(
        default=None, description="Up to 10 hosts never returned", **limit(items=10)
    )
    freshness: TimeRange | None = Field(default=None, description="Only pages published within the window")
    published_after: str | None = Field(
        default=None, description="YYYY-MM-DD, on or after", json_schema_extra=dict(DATE_LIMITS)
    )
    published_before: str | None = Field(
        default=None, description="YYYY-MM-DD, before", json_schema_extra=dict(DATE_LIMITS)
    )
    depth: Literal["fast", "deep"] = Field(default="fast", description="deep: more engines and query rewrites")
    content_chars: int = Field(default=0, ge=0, le=2000, description="Verified excerpt length per result")
    country: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z]{2}$",
        description="Two-letter market code; inferred from the query when omitted",
        **limit(chars=2),
    )
    lang: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z]{2}(-[A-Za-z]{2})?$",
        description="xx or xx-yy language tag; inferred from the query when omitted",
        **limit(chars=5),
    )
    mode: Literal["codai", "google"] = "codai"
    fallback: Literal["auto", "off"] = "auto"

    @field_validator("query")
    @classmethod
    def _trim(cls, v: str) -> str:
        v = v.strip()
        if not 1 <= len(v) <= 400:
            raise ValueError("query must be 1-400 characters after trimming")
        return v

    @field_validator("include_domains", "exclude_domains")
    @classmethod
    def _domains(cls, v: list[str] | None) -> list[str] | None:
        return _check_domains(v)

    @field_validator("published_after", "published_before")
    @classmethod
    def _dates(cls, v: str | None) -> str | None:
        return _check_date(v)


class SearchResultItem(BaseModel):
    title: str
    url: str
    snippet: str
    source: str
    verified: bool
    published_at: str | None
    crawled_at: str | None = None
    content: str | None = None


class SearchResponse(BaseModel):
    """Response of ``POST /v1/tools/search``."""

    results: list[SearchResultItem]
    provider: str = "agent-tools"
    took_ms: int
    cached: bool
    coverage: float
    sources_tried: list[str]
    degraded: list[str]
    notes: list[str] = Field(default_factory=list)
    secondary: list[SearchResultItem] = Field(default_factory=list, description="[G1]..[Gn] block")
    intent: str = Field(default="general", description="code, news, docs or general (read from the query)")


class WebFetchArgs(BaseModel):
    """``web_fetch`` and ``POST /v1/tools/fetch``."""

    url: str = Field(min_length=1, max_length=2048, description="https:// is prepended when the scheme is missing")
    max_chars: int = Field(default=8000, ge=200, le=40_000)
    focus: str | None = Field(default=None, max_length=300, description="Return only the best-matching paragraphs")
    format: Literal["markdown", "text"] = "markdown"


class FetchResponse(BaseModel):
    """Response of ``POST /v1/tools/fetch`` (and the structured data of ``web_fetch``)."""

    url: str
    final_url: str
    title: str | None
    byline: str | None
    description: str | None
    canonical: str | None
    lang: str | None
    content_type: str
    content: str
    chars: int
    truncated: bool
    took_ms: int
    cached: bool
    published_at: str | None = None


class HttpFetchArgs(BaseModel):
    """``http_fetch``: the raw response, under the same SSRF guard and limits as web_fetch."""

    url: str = Field(min_length=1, max_length=2048)
    method: Literal["GET", "HEAD"] = Field(default="GET", description="Reads only (tool level l1_http)")
    headers: dict[str, Annotated[str, Field(**limit(chars=8192))]] | None = Field(
        default=None, description="Extra request headers (Accept, ...)", **limit(properties=50)
    )
    max_chars: int = Field(default=20_000, ge=100, le=200_000)

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str] | None) -> dict[str, str] | None:
        if v is None:
            return None
        if len(v) > 20 or any(
            len(k) > 100 or len(val) > 2000 or "\n" in k + val or "\r" in k + val for k, val in v.items()
        ):
            raise ValueError("at most 20 headers, names up to 100 and values up to 2000 characters, one line each")
        return v


class HttpFetchResult(BaseModel):
    url: str
    final_url: str
    status: int
    content_type: str
    headers: dict[str, str]
    body: str
    bytes: int
    truncated: bool
    took_ms: int


class JsonQueryArgs(BaseModel):
    """``json_query``: query a JSON document (JMESPath: :mod:`agent_tools.contracts._query`, docs/web.md)."""

    document: Any = Field(description="The JSON document: any JSON value, or a string holding JSON text")
    query: str = Field(
        min_length=1,
        max_length=1000,
        description="JMESPath, e.g. items[?price > `10`].name | sort(@)   (jq-style .a[0].b works too)",
    )


class ResearchRequest(BaseModel):
    """``deep_research`` and ``POST /v1/research``."""

    question: str = Field(min_length=1, max_length=2000)
    time_budget_s: int = Field(default=90, ge=20, le=300)
    max_sources: int = Field(default=12, ge=3, le=30)
    include_domains: list[str] | None = None
    published_after: str | None = None
    output_schema: dict[str, Any] | None = None

    @field_validator("include_domains")
    @classmethod
    def _domains(cls, v: list[str] | None) -> list[str] | None:
        return _check_domains(v)

    @field_validator("published_after")
    @classmethod
    def _dates(cls, v: str | None) -> str | None:
        return _check_date(v)


class ResearchSource(BaseModel):
    n: int
    title: str
    url: str
    published_at: str | None = None


class ResearchJob(BaseModel):
    """A deep_research job as ``GET /v1/research/{id}`` and the client return it."""

    id: str
    status: Literal["running", "completed", "failed"]
    question: str = ""
    phase: str = ""
    report: str | None = None
    answer: Any = None
    sources: list[ResearchSource] = Field(default_factory=list)
    searches: list[str] = Field(default_factory=list)
    error: str | None = None
    took_ms: int | None = None
    # The job's own model calls (planner and writer), failed writer attempts included.
    usage: Usage = Field(default_factory=Usage)


# --- deep_research workflow and activities (durable contracts: add optional fields only) -------------

RESEARCH_WORKFLOW = "DeepResearch"


class ResearchPlanInput(BaseModel):
    question: str
    max_queries: int = 4


class ResearchPlan(BaseModel):
    queries: list[str]
    usage: Usage | None = None


class ResearchSearchInput(BaseModel):
    query: str
    include_domains: list[str] | None = None
    published_after: str | None = None
    max_results: int = 8


class ResearchCandidate(BaseModel):
    url: str
    title: str
    snippet: str = ""
    published_at: str | None = None


class ResearchSearchOutput(BaseModel):
    query: str
    candidates: list[ResearchCandidate] = Field(default_factory=list)
    error: str | None = None


class ResearchReadInput(BaseModel):
    url: str
    title: str = ""


class ResearchReadOutput(BaseModel):
    """Only a summary crosses into history; the page itself waits in the SQL cache for the writer."""

    url: str
    ok: bool
    title: str | None = None
    chars: int = 0
    published_at: str | None = None
    error: str | None = None


class ResearchWriteInput(BaseModel):
    question: str
    sources: list[ResearchSource]
    output_schema: dict[str, Any] | None = None


class ResearchWriteOutput(BaseModel):
    report: str | None = None
    answer: Any = None
    usage: Usage | None = None
