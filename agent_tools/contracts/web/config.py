"""Web settings: engine order, engine endpoints and keys, limits, rate limits.

Like every capability's settings, they live next to their code and come from the environment
(``AGENT_TOOLS_WEB_SEARXNG_URL`` ...) or the defaults below; tests pass them to ``WebConfig`` directly.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class WebConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="AGENT_TOOLS_", extra="ignore", env_nested_delimiter="__")

    # Search engines, tried in this order; an engine without its key or base URL is left out.
    web_search_engines: list[str] = Field(default_factory=lambda: ["searxng", "duckduckgo", "bing", "tavily", "brave"])
    # Second group ([G1]..[Gn]) consulted when the first returns fewer than web_thin_results results.
    web_fallback_engines: list[str] = Field(default_factory=list)
    web_thin_results: int = 3
    web_searxng_url: str | None = None  # e.g. http://searxng:8080 (no public default: self-hosted)
    web_duckduckgo_url: str = "https://html.duckduckgo.com/html/"
    web_bing_url: str = "https://www.bing.com/search"
    web_tavily_url: str = "https://api.tavily.com/search"
    web_tavily_api_key: str | None = None
    web_brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    web_brave_api_key: str | None = None
    web_engine_timeout_s: float = 8.0
    # Circuit breaker: an engine that fails sits out base * 2^(failures-1) seconds, capped.
    web_breaker_base_s: float = 30.0
    web_breaker_max_s: float = 600.0
    web_user_agent: str = (
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"
    )

    # Caches (SQL store, shared by every worker).
    web_search_cache_s: int = 600
    web_fetch_cache_s: int = 900
    web_rtc_fetch_cache_s: int = 1800

    # webFetch (RTC): 50,000 bytes of Markdown go to the small model with the prompt.
    web_llm_extract_threshold: int = 50_000
    web_llm_extract_max_chars: int = 200_000

    # Standalone endpoints.
    web_api_keys: list[str] = Field(default_factory=list, description="bearer keys for /v1/tools and /v1/research")
    web_rate_per_minute: int = 60
    web_rate_per_hour: int = 1000
