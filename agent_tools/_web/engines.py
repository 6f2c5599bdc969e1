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

from agent_tools._errors import AgentToolsError
from agent_tools._retry_after import parse_retry_after
from agent_tools.contracts._web.config import WebConfig
from agent_tools.contracts._web.models import EngineFailure, SearchHit
from agent_tools.contracts._web.urls import normalize_url, unwrap_redirect


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
    """Tags stripped, entities decoded, NUL bytes and lone surrogates dropped, whitespace collapsed."""
    text = re.sub(r"<[^>]+>", "", str(value or "")[:100_000])
    text = _UNSAFE.sub("\ufffd", html_lib.unescape(text))
    return " ".join(text.split())


# NUL and lone surrogates (which no encoder can write out) become U+FFFD.
_UNSAFE = re.compile("[\x00\ud800-\udfff]")


_TITLE_CHARS = 500
_SNIPPET_CHARS = 2000
_URL_CHARS = 2048


def make_hit(title: Any, url: Any, snippet: Any, source: str, published_at: str | None = None) -> SearchHit | None:
    """One engine result, normalised: tags and entities out, whitespace collapsed, lengths capped, and
    None for a result without an http(s) URL of sane length (an engine's junk row is dropped, never
    fatal)."""
    link = str(url or "").strip()
    if not link.lower().startswith(("http://", "https://")) or len(link) > _URL_CHARS or "\x00" in link:
        return None
    return SearchHit(
        title=clean_text(title)[:_TITLE_CHARS],
        url=link,
        snippet=clean_text(snippet)[:_SNIPPET_CHARS],
        source=source,
        published_at=published_at,
    )


def _rows(value: Any) -> list[dict[str, Any]]:
    """The result rows of an API answer: a list of objects, whatever else the engine sent."""
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


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
    url: str = ""
    """Where the engine answers; the reachability probe (``_web/probe.py``) asks it."""

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        raise NotImplementedError


class SearxngEngine(SearchEngine):
    name = "searxng"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/"

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        params: dict[str, str] = {"q": q.query, "format": "json", "pageno": "1"}
        if q.time_range:
            params["time_range"] = q.time_range
        if q.lang:
            params["language"] = q.lang
        response = await client.get(f"{self.base_url}/search", params=params, headers={"Accept": "application/json"})
        body = _json_body(self.name, response)
        if not isinstance(body, dict):
            raise EngineError("malformed response (not a JSON object)")
        results = _rows(body.get("results"))
        unresponsive = body.get("unresponsive_engines")
        if not results and isinstance(unresponsive, list) and unresponsive:
            names = ", ".join(
                f"{u[0]} ({u[1]})" if isinstance(u, list) and len(u) > 1 else str(u) for u in unresponsive[:10]
            )
            raise EngineError(f"no results; upstream engines unresponsive: {clean_text(names)[:300]}")
        hits = (
            make_hit(r.get("title"), r.get("url"), r.get("content"), self.name, iso_or_none(r.get("publishedDate")))
            for r in results
        )
        return [h for h in hits if h is not None]


_TIMELIMIT = {"day": "d", "week": "w", "month": "m", "year": "y"}
_BING_DATE = re.compile(r"^([A-Z][a-z]{2} \d{1,2}, \d{4})\s*[\u00b7\u2013-]\s*")


def ddgs_region(q: EngineQuery, default: str) -> str:
    """ddgs's region code, ``<country>-<language>`` (``us-en``; ``wt-wt`` is worldwide), from the query's
    market: country and language when both are known, the language's own region (``en-gb``) else."""
    lang, _, lang_region = (q.lang or "").lower().partition("-")
    country = (q.country or lang_region).lower()
    if lang and country:
        return f"{country}-{lang}"
    if country:
        return f"{country}-{default.split('-')[1]}" if default != "wt-wt" else f"{country}-en"
    if lang:
        return f"{default.split('-')[0]}-{lang}"
    return default


class DdgsEngine(SearchEngine):
    """An HTML search page scraped by the ddgs library (DuckDuckGo's HTML endpoint, Bing).

    ddgs is maintained against the engines' markup changes: it builds the request (parameters, region,
    time filter, Bing's market cookies), sends it with a browser-like client (primp) and parses the
    result page with its engine's XPath. What stays ours is what the failover needs and ddgs does not
    report: the throttle status (DuckDuckGo's 202, 429), CAPTCHA and challenge pages, and the
    normalisation every engine's results get. ddgs is synchronous, so a search runs in a thread; the
    search layer's timeout bounds the wait, and primp's own timeout (the same) ends the thread.
    """

    def __init__(self, name: str, ddgs_name: str, url: str, *, timeout_s: float, default_region: str) -> None:
        self.name = name
        self.ddgs_name = ddgs_name
        self.url = url
        self.timeout_s = timeout_s
        self.default_region = default_region

    async def search(self, client: httpx.AsyncClient, q: EngineQuery) -> list[SearchHit]:
        return await asyncio.to_thread(self._search, q)

    def _engine(self) -> Any:
        # Imported with the first search: ddgs brings primp and lxml, which a worker that never searches
        # these engines does not need.
        from ddgs.engines.bing import Bing
        from ddgs.engines.duckduckgo import Duckduckgo

        engine_class = {"duckduckgo": Duckduckgo, "bing": Bing}[self.ddgs_name]
        # A new engine per search: Bing's request sets market cookies on the client, and one search's
        # cookies must not ride along with another's.
        engine = engine_class(timeout=self.timeout_s)  # type: ignore[arg-type]  # primp takes float seconds
        engine.search_url = self.url  # configurable endpoint: a mirror, or a local server in tests
        return engine

    def _search(self, q: EngineQuery) -> list[SearchHit]:
        from ddgs.exceptions import DDGSException, TimeoutException

        engine = self._engine()
        payload = engine.build_payload(
            query=q.query,
            region=ddgs_region(q, self.default_region),
            safesearch="moderate",
            timelimit=_TIMELIMIT.get(q.time_range or ""),
            page=1,
        )
        body = "params" if engine.search_method == "GET" else "data"
        try:
            response = engine.http_client.request(engine.search_method, self.url, **{body: payload})
        except TimeoutException as exc:
            raise TimeoutError(str(exc)) from exc
        except DDGSException as exc:
            cause = exc.__cause__ or exc
            raise EngineError(f"connection failed ({cause.__class__.__name__})") from exc
        if response.status_code == 202:
            # DuckDuckGo answers 202 with an empty page when it throttles a client.
            raise EngineError("rate limited (202)")
        if response.status_code == 429:
            raise EngineError("rate limited (429)")
        if response.status_code >= 400:
            raise EngineError(f"HTTP {response.status_code}")
        text = response.text or ""
        try:
            results = engine.post_extract_results(engine.extract_results(text)) if text.strip() else []
        except (ValueError, TypeError, UnicodeError) as exc:  # lxml on a page that is not HTML at all
            raise EngineError(f"malformed result page ({exc.__class__.__name__})") from exc
        hits = [h for r in results if (h := self._hit(r)) is not None]
        if not hits and _CAPTCHA.search(text) and "no-results" not in text:
            raise EngineError("CAPTCHA / bot challenge")
        return hits

    def _hit(self, result: Any) -> SearchHit | None:
        url = unwrap_redirect(str(getattr(result, "href", "") or ""))
        if "duckduckgo.com/y.js" in url:
            return None  # an ad's click link
        snippet = clean_text(getattr(result, "body", ""))
        published = None
        if self.ddgs_name == "bing" and (m := _BING_DATE.match(snippet)):
            try:
                published = dt.datetime.strptime(m.group(1), "%b %d, %Y").strftime("%Y-%m-%dT00:00:00Z")
                snippet = snippet[m.end() :]
            except ValueError:
                published = None
        return make_hit(getattr(result, "title", ""), url, snippet, self.name, published)


# Tavily names countries in full; a code it does not know is left out rather than failing the search.
_TAVILY_COUNTRIES = {
    "US": "united states", "GB": "united kingdom", "CA": "canada", "AU": "australia", "IE": "ireland",
    "NZ": "new zealand", "IN": "india", "DE": "germany", "AT": "austria", "CH": "switzerland",
    "FR": "france", "BE": "belgium", "IT": "italy", "ES": "spain", "PT": "portugal", "NL": "netherlands",
    "SE": "sweden", "DK": "denmark", "NO": "norway", "FI": "finland", "PL": "poland", "CZ": "czech republic",
    "SK": "slovakia", "HU": "hungary", "RO": "romania", "TR": "turkey", "GR": "greece", "RU": "russia",
    "UA": "ukraine", "BG": "bulgaria", "JP": "japan", "KR": "south korea", "CN": "china", "IL": "israel",
    "ID": "indonesia", "VN": "vietnam", "TH": "thailand", "MX": "mexico", "BR": "brazil", "AR": "argentina",
}  # fmt: skip
# Brave's search_lang codes where they differ from ISO 639-1.
_BRAVE_LANGS = {"ja": "jp", "zh": "zh-hans", "pt": "pt-pt"}


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
        if q.country and q.country.upper() in _TAVILY_COUNTRIES:
            payload["country"] = _TAVILY_COUNTRIES[q.country.upper()]
        response = await client.post(self.url, json=payload, headers={"Authorization": f"Bearer {self.api_key}"})
        body = _json_body(self.name, response)
        hits = (
            make_hit(r.get("title"), r.get("url"), r.get("content"), self.name, iso_or_none(r.get("published_date")))
            for r in _rows(body.get("results") if isinstance(body, dict) else None)
        )
        return [h for h in hits if h is not None]


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
            lang = q.lang.split("-")[0].lower()
            params["search_lang"] = _BRAVE_LANGS.get(lang, lang)
        response = await client.get(
            self.url,
            params=params,
            headers={"X-Subscription-Token": self.api_key, "Accept": "application/json"},
        )
        body = _json_body(self.name, response)
        web = body.get("web") if isinstance(body, dict) else None
        hits = (
            make_hit(r.get("title"), r.get("url"), r.get("description"), self.name, iso_or_none(r.get("page_age")))
            for r in _rows(web.get("results") if isinstance(web, dict) else None)
        )
        return [h for h in hits if h is not None]


def build_engine(name: str, config: WebConfig) -> SearchEngine | None:
    """The engine called ``name`` when it is configured (base URL, key), else None."""
    if name == "searxng" and config.searxng_url:
        return SearxngEngine(config.searxng_url)
    if name == "duckduckgo":
        return DdgsEngine(
            "duckduckgo",
            "duckduckgo",
            config.duckduckgo_url,
            timeout_s=config.engine_timeout_s,
            default_region="wt-wt",
        )
    if name == "bing":
        return DdgsEngine("bing", "bing", config.bing_url, timeout_s=config.engine_timeout_s, default_region="us-en")
    if name == "tavily" and config.tavily_api_key:
        return TavilyEngine(config.tavily_url, config.tavily_api_key)
    if name == "brave" and config.brave_api_key:
        return BraveEngine(config.brave_url, config.brave_api_key)
    return None


def search_configured(config: WebConfig) -> bool:
    """Whether any search engine of the deployment is configured (RTC registers webSearch only then)."""
    return any(build_engine(name, config) is not None for name in [*config.search_engines, *config.fallback_engines])


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
