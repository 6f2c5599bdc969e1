"""Search engines behind one interface, and the layer that tries them in order.

Each engine turns a query into :class:`SearchHit` rows or raises :class:`EngineError` with a short reason.
An engine fails on an HTTP error, a timeout, a rate limit (429, DuckDuckGo's 202), a CAPTCHA page, or
SearXNG's "200 with no results while its upstream engines are down" (``unresponsive_engines``). The
:class:`SearchLayer` skips failed engines, and puts each behind a :class:`CircuitBreaker` so the next
searches do not wait on it again.

Engines are configured endpoints (a self-hosted SearXNG often lives on a private network), so they are
called with a plain client, not through the SSRF guard that protects user-supplied URLs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import html as html_lib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from agent_tools.activities.providers.base import parse_retry_after
from agent_tools.contracts.web.config import WebConfig
from agent_tools.contracts.web.models import EngineFailure, SearchHit
from agent_tools.contracts.web.urls import normalize_url, unwrap_redirect
from agent_tools.errors import AgentToolsError


class EngineError(AgentToolsError):
    """One search engine failed (the service fails over to the next and may open its breaker)."""

    def __init__(self, reason: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


@dataclass(frozen=True)
class EngineQuery:
    query: str
    max_results: int = 10
    time_range: str | None = None  # day | week | month | year
    lang: str | None = None
    country: str | None = None


def clean_text(value: Any) -> str:
    """Tags stripped, entities decoded, whitespace collapsed."""
    text = re.sub(r"<[^>]+>", "", str(value or ""))
    return " ".join(html_lib.unescape(text).split())


def iso_or_none(value: Any) -> str | None:
    """An ISO date(-time) the engine gave, in UTC; relative ages ("2 days ago") are not dates."""
    if not value or not isinstance(value, str):
        return None
    text = value.strip()
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        m = re.match(r"^(\d{4}-\d{2}-\d{2})", text)
        if not m:
            return None
        try:
            parsed = dt.datetime.fromisoformat(m.group(1))
        except ValueError:
            return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(dt.UTC).replace(tzinfo=None)
    return parsed.strftime("%Y-%m-%dT%H:%M:%SZ")


def _raise_for_status(engine: str, response: httpx.Response) -> None:
    if response.status_code == 429:
        raise EngineError("rate limited (429)", retry_after=parse_retry_after(response.headers.get("retry-after")))
    if response.status_code >= 400:
        raise EngineError(f"HTTP {response.status_code}")


def _json_body(engine: str, response: httpx.Response) -> Any:
    """The JSON body of an API engine's answer; HTTP failures and non-JSON answers are engine errors."""
    _raise_for_status(engine, response)
    try:
        return response.json()
    except ValueError as exc:
        raise EngineError("malformed response (not JSON)") from exc


_CAPTCHA = re.compile(
    r"captcha|are you a robot|unusual traffic|bots use duckduckgo|anomaly-modal|"
    r"challenge-form|/challenge\b",
    re.I,
)


class SearchEngine:
    name: str = "engine"

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        raise NotImplementedError


class SearxngEngine(SearchEngine):
    name = "searxng"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        params: dict[str, str] = {"q": q.query, "format": "json", "pageno": "1"}
        if q.time_range:
            params["time_range"] = q.time_range
        if q.lang:
            params["language"] = q.lang
        response = await client.get(f"{self.base_url}/search", params=params, headers={"Accept": "application/json"})
        body = _json_body(self.name, response)
        results = body.get("results") or []
        unresponsive = body.get("unresponsive_engines") or []
        if not results and unresponsive:
            names = ", ".join(
                f"{u[0]} ({u[1]})" if isinstance(u, list) and len(u) > 1 else str(u) for u in unresponsive
            )
            raise EngineError(f"no results; upstream engines unresponsive: {names}")
        return [
            SearchHit(
                title=clean_text(r.get("title")),
                url=str(r.get("url", "")),
                snippet=clean_text(r.get("content")),
                source=self.name,
                published_at=iso_or_none(r.get("publishedDate")),
            )
            for r in results
            if isinstance(r, dict) and r.get("url")
        ]


class DuckDuckGoEngine(SearchEngine):
    name = "duckduckgo"
    _DF = {"day": "d", "week": "w", "month": "m", "year": "y"}

    def __init__(self, url: str) -> None:
        self.url = url

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        data = {"q": q.query, "b": ""}
        if q.time_range:
            data["df"] = self._DF[q.time_range]
        if q.country and q.lang:
            data["kl"] = f"{q.country.lower()}-{q.lang.split('-')[0].lower()}"
        response = await client.post(self.url, data=data)
        if response.status_code == 202:
            # DuckDuckGo answers 202 with an empty page when it throttles a client.
            raise EngineError("rate limited (202)")
        _raise_for_status(self.name, response)
        return parse_duckduckgo(response.text)


def _parse_html(text: str) -> Any:
    # Imported with the first result page: lxml weighs 5 MB in a worker that may never search.
    import lxml.html  # type: ignore[import-untyped]

    return lxml.html.fromstring(text or "<html/>")


def parse_duckduckgo(text: str) -> list[SearchHit]:
    doc = _parse_html(text)
    hits: list[SearchHit] = []
    for result in doc.xpath('//div[contains(concat(" ", normalize-space(@class), " "), " result ")]'):
        if "result--ad" in (result.get("class") or ""):
            continue
        links = result.xpath('.//a[contains(@class, "result__a")]')
        if not links:
            continue
        url = unwrap_redirect(links[0].get("href", ""))
        if "duckduckgo.com/y.js" in url:
            continue  # ad click
        snippet = result.xpath('.//*[contains(@class, "result__snippet")]')
        hits.append(
            SearchHit(
                title=clean_text(links[0].text_content()),
                url=url,
                snippet=clean_text(snippet[0].text_content()) if snippet else "",
                source="duckduckgo",
            )
        )
    if not hits and _CAPTCHA.search(text or "") and not doc.xpath('//*[contains(@class, "no-results")]'):
        raise EngineError("CAPTCHA / bot challenge")
    return hits


class BingEngine(SearchEngine):
    """Bing's HTML results page (the Bing Search API was retired on 2025-08-11)."""

    name = "bing"
    _FILTERS = {"day": 'ex1:"ez1"', "week": 'ex1:"ez2"', "month": 'ex1:"ez3"'}

    def __init__(self, url: str) -> None:
        self.url = url

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        params = {"q": q.query, "count": str(min(max(q.max_results, 10), 50))}
        if q.time_range == "year":
            today = (dt.date.today() - dt.date(1970, 1, 1)).days
            params["filters"] = f'ex1:"ez5_{today - 365}_{today}"'
        elif q.time_range:
            params["filters"] = self._FILTERS[q.time_range]
        if q.lang:
            params["setlang"] = q.lang
        if q.country:
            params["cc"] = q.country.upper()
        response = await client.get(self.url, params=params)
        _raise_for_status(self.name, response)
        return parse_bing(response.text)


_BING_DATE = re.compile(r"^([A-Z][a-z]{2} \d{1,2}, \d{4})\s*[\u00b7\u2013-]\s*")


def parse_bing(text: str) -> list[SearchHit]:
    doc = _parse_html(text)
    hits: list[SearchHit] = []
    for li in doc.xpath('//li[contains(concat(" ", normalize-space(@class), " "), " b_algo ")]'):
        links = li.xpath(".//h2/a")
        if not links:
            continue
        url = unwrap_redirect(links[0].get("href", ""))
        paras = li.xpath('.//div[contains(@class, "b_caption")]//p | .//p[contains(@class, "b_lineclamp")]')
        snippet = clean_text(paras[0].text_content()) if paras else ""
        published = None
        m = _BING_DATE.match(snippet)
        if m:
            try:
                published = dt.datetime.strptime(m.group(1), "%b %d, %Y").strftime("%Y-%m-%dT00:00:00Z")
                snippet = snippet[m.end() :]
            except ValueError:
                published = None
        hits.append(
            SearchHit(
                title=clean_text(links[0].text_content()),
                url=url,
                snippet=snippet,
                source="bing",
                published_at=published,
            )
        )
    if not hits and _CAPTCHA.search(text or ""):
        raise EngineError("CAPTCHA / bot challenge")
    return hits


class TavilyEngine(SearchEngine):
    name = "tavily"

    def __init__(self, url: str, api_key: str) -> None:
        self.url = url
        self.api_key = api_key

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        payload: dict[str, Any] = {
            "query": q.query,
            "max_results": min(q.max_results, 20),
            "search_depth": "basic",
        }
        if q.time_range:
            payload["time_range"] = q.time_range
        if q.country:
            payload["country"] = q.country.lower()
        response = await client.post(self.url, json=payload, headers={"Authorization": f"Bearer {self.api_key}"})
        body = _json_body(self.name, response)
        return [
            SearchHit(
                title=clean_text(r.get("title")),
                url=str(r["url"]),
                snippet=clean_text(r.get("content")),
                source=self.name,
                published_at=iso_or_none(r.get("published_date")),
            )
            for r in body.get("results") or []
            if isinstance(r, dict) and r.get("url")
        ]


class BraveEngine(SearchEngine):
    name = "brave"
    _FRESH = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}

    def __init__(self, url: str, api_key: str) -> None:
        self.url = url
        self.api_key = api_key

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        params = {"q": q.query, "count": str(min(q.max_results, 20))}
        if q.time_range:
            params["freshness"] = self._FRESH[q.time_range]
        if q.country:
            params["country"] = q.country.lower()
        if q.lang:
            params["search_lang"] = q.lang.split("-")[0]
        response = await client.get(
            self.url,
            params=params,
            headers={"X-Subscription-Token": self.api_key, "Accept": "application/json"},
        )
        body = _json_body(self.name, response)
        return [
            SearchHit(
                title=clean_text(r.get("title")),
                url=str(r["url"]),
                snippet=clean_text(r.get("description")),
                source=self.name,
                published_at=iso_or_none(r.get("page_age")),
            )
            for r in (body.get("web") or {}).get("results") or []
            if isinstance(r, dict) and r.get("url")
        ]


def build_engine(name: str, config: WebConfig) -> SearchEngine | None:
    """The engine called ``name`` when it is configured (base URL, key), else None."""
    if name == "searxng" and config.web_searxng_url:
        return SearxngEngine(config.web_searxng_url)
    if name == "duckduckgo":
        return DuckDuckGoEngine(config.web_duckduckgo_url)
    if name == "bing":
        return BingEngine(config.web_bing_url)
    if name == "tavily" and config.web_tavily_api_key:
        return TavilyEngine(config.web_tavily_url, config.web_tavily_api_key)
    if name == "brave" and config.web_brave_api_key:
        return BraveEngine(config.web_brave_url, config.web_brave_api_key)
    return None


@dataclass
class _BreakerState:
    failures: int = 0
    open_until: float = 0.0
    last_reason: str = ""


@dataclass
class CircuitBreaker:
    """Per engine: after a failure the engine sits out base * 2^(n-1) seconds (capped; a longer
    Retry-After wins); one success closes it again. Per worker process: a shared breaker would need a
    round trip to the store on every search, and each worker learns an outage within one call anyway."""

    base_s: float = 30.0
    max_s: float = 600.0
    clock: Callable[[], float] = time.monotonic
    _states: dict[str, _BreakerState] = field(default_factory=dict)

    def is_open(self, engine: str) -> bool:
        state = self._states.get(engine)
        return state is not None and self.clock() < state.open_until

    def failure(self, engine: str, reason: str, retry_after: float | None = None) -> None:
        state = self._states.setdefault(engine, _BreakerState())
        state.failures += 1
        cooldown = min(self.max_s, self.base_s * 2 ** (state.failures - 1))
        if retry_after:
            cooldown = max(cooldown, min(retry_after, self.max_s))
        state.open_until = self.clock() + cooldown
        state.last_reason = reason

    def success(self, engine: str) -> None:
        self._states.pop(engine, None)


@dataclass
class GroupResult:
    hits: list[SearchHit] = field(default_factory=list)
    tried: list[str] = field(default_factory=list)
    failed: list[EngineFailure] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)


def merge_hits(groups: list[list[SearchHit]]) -> list[SearchHit]:
    """De-duplicate by normalised URL, keeping the first and filling a missing date or snippet from later."""
    by_key: dict[str, SearchHit] = {}
    for hits in groups:
        for hit in hits:
            url = unwrap_redirect(hit.url)
            if not url.startswith(("http://", "https://")):
                continue
            key = normalize_url(url)
            if key in by_key:
                first = by_key[key]
                if not first.published_at and hit.published_at:
                    first.published_at = hit.published_at
                if not first.snippet and hit.snippet:
                    first.snippet = hit.snippet
                continue
            by_key[key] = hit.model_copy(update={"url": url})
    return list(by_key.values())


class SearchLayer:
    """Ordered failover over a group of engines."""

    def __init__(
        self,
        engines: list[SearchEngine],
        breaker: CircuitBreaker,
        client: httpx.AsyncClient,
        *,
        timeout_s: float = 8.0,
    ) -> None:
        self.engines = engines
        self.breaker = breaker
        self.client = client
        self.timeout_s = timeout_s

    async def run(self, q: EngineQuery, *, want_engines: int = 1, enough: int = 1) -> GroupResult:
        """Ask engines in order until ``want_engines`` answered and ``enough`` distinct results are in."""
        out = GroupResult()
        collected: list[list[SearchHit]] = []
        for engine in self.engines:
            if len(out.answered) >= want_engines and len(merge_hits(collected)) >= enough:
                break
            if self.breaker.is_open(engine.name):
                out.skipped.append(engine.name)
                continue
            out.tried.append(engine.name)
            try:
                async with asyncio.timeout(self.timeout_s):
                    hits = await engine.search(self.client, q)
            except EngineError as exc:
                self.breaker.failure(engine.name, exc.reason, exc.retry_after)
                out.failed.append(EngineFailure(engine=engine.name, reason=exc.reason))
                continue
            except TimeoutError:
                self.breaker.failure(engine.name, "timeout")
                out.failed.append(EngineFailure(engine=engine.name, reason=f"timeout after {self.timeout_s:g} s"))
                continue
            except httpx.HTTPError as exc:
                self.breaker.failure(engine.name, "connection")
                out.failed.append(
                    EngineFailure(engine=engine.name, reason=f"connection failed ({exc.__class__.__name__})")
                )
                continue
            self.breaker.success(engine.name)
            if hits:
                out.answered.append(engine.name)
                collected.append(hits)
        out.hits = merge_hits(collected)
        return out
