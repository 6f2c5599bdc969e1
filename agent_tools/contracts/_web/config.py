"""Web settings: engine order, engine endpoints and keys, limits, rate limits.

The ``web`` section of :class:`agent_tools.Settings` (``settings.web``; environment
``AGENT_TOOLS_WEB__SEARXNG_URL`` and so on). Code passes them as ``Settings(web=WebConfig(...))``.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class WebConfig(BaseModel):
    """The web capability's settings (``settings.web``)."""

    # The SSRF guard refuses loopback addresses unless a test or a local deployment opts in.
    allow_loopback: bool = False

    # Search engines, tried in this order; an engine without its key or base URL is left out.
    search_engines: list[str] = Field(default_factory=lambda: ["searxng", "duckduckgo", "bing", "tavily", "brave"])
    # Second group ([G1]..[Gn]) consulted when the first returns fewer than thin_results results.
    fallback_engines: list[str] = Field(default_factory=list)
    thin_results: int = 3
    searxng_url: str | None = None  # e.g. http://searxng:8080 (no public default: self-hosted)
    duckduckgo_url: str = "https://html.duckduckgo.com/html/"
    bing_url: str = "https://www.bing.com/search"
    tavily_url: str = "https://api.tavily.com/search"
    tavily_api_key: str | None = None
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    brave_api_key: str | None = None
    engine_timeout_s: float = 8.0
    # The search tools are offered while one engine answers the worker's probe: at start, then every
    # probe_interval_s; one probe waits at most probe_timeout_s for every engine.
    probe_interval_s: float = Field(default=300.0, gt=0)
    probe_timeout_s: float = Field(default=3.0, gt=0)
    # Circuit breaker: an engine that fails sits out base * 2^(failures-1) seconds, capped.
    breaker_base_s: float = 30.0
    breaker_max_s: float = 600.0
    user_agent: str = (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
    )

    # Caches (SQL store, shared by every worker).
    search_cache_s: int = 600
    fetch_cache_s: int = 900
    rtc_fetch_cache_s: int = 1800

    # RTC: webFetch (and codai's web_fetch) are registered only when the server has fetching configured.
    fetch_enabled: bool = True

    # webFetch (RTC): 50,000 bytes of Markdown go to the small model with the prompt.
    llm_extract_threshold: int = 50_000
    llm_extract_max_chars: int = 200_000

    # Standalone endpoints.
    api_keys: list[str] = Field(default_factory=list, description="bearer keys for /v1/tools and /v1/research")
    rate_per_minute: int = 60
    rate_per_hour: int = 1000
