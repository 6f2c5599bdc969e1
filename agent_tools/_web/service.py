"""The web engine: one search layer and one fetch pipeline, and the faces' shared logic on top.

    URL checks -> SSRF guard (every hop, pinned IP) -> GET with limits -> content-type gate
    -> main-content extraction -> Markdown -> focus window -> (untrusted fence, by the face) -> cache

Tool implementations (:mod:`agent_tools.activities._web_tools`), the research activities and the HTTP endpoints all
call this one object; failures are :class:`WebError` with the contract's code and HTTP status.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import ssl
import time
from collections.abc import Callable
from typing import Any, Literal

import httpx

from agent_tools._errors import WebError
from agent_tools._store.db import Store
from agent_tools._web.cache import WebCache
from agent_tools._web.engines import (
    CircuitBreaker,
    EngineQuery,
    GroupResult,
    SearchEngine,
    SearchLayer,
    build_engine,
    merge_hits,
)
from agent_tools._web.fetcher import FetchError, FetchLimits, GuardedFetcher, Resolver, media_type
from agent_tools._web.market import infer_market
from agent_tools.contracts._web.config import WebConfig
from agent_tools.contracts._web.models import (
    FetchResponse,
    HttpFetchArgs,
    HttpFetchResult,
    Page,
    SearchHit,
    SearchOutcome,
    WebFetchArgs,
    WebSearchArgs,
)
from agent_tools.contracts._web.ssrf import UrlRefused, check_url, ensure_scheme
from agent_tools.contracts._web.text import focus_window, markdown_to_text, truncate, words
from agent_tools.contracts._web.urls import normalize_url, passes_domain_filters, rule_host

FetchProfile = Literal["codai", "rtc"]

ACCEPTED_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "text/plain",
        "application/json",
        "text/markdown",
        "text/x-markdown",
        "application/xml",
        "text/xml",
    }
)


def accepted_type(content_type: str) -> bool:
    """HTML, XHTML, plain text, JSON, Markdown and XML (and ``+json``/``+xml`` types); no header: sniffed."""
    mt = media_type(content_type)
    return not mt or mt in ACCEPTED_TYPES or mt.endswith(("+json", "+xml"))


def _from_fetch_error(exc: FetchError) -> WebError:
    if exc.code == "bad_request":
        return WebError("bad_request", str(exc), http_status=400, details={"url": exc.url})
    if exc.code == "unsupported_content_type":
        # codai's fetch errors are 400 bad_request and 502 upstream_error: a page of a type it does not read is
        # the upstream's answer being unusable, so 502 upstream_error, with the type in the details.
        return WebError(
            "upstream_error",
            str(exc),
            http_status=502,
            details={"status": exc.status, "url": exc.url, "content_type": exc.content_type},
        )
    if exc.code == "too_large":
        return WebError("too_large", str(exc), http_status=413, details={"url": exc.url, "status": exc.status})
    return WebError("upstream_error", str(exc), http_status=502, details={"status": exc.status, "url": exc.url})


_FRESHNESS_DAYS = {"day": 1, "week": 7, "month": 31, "year": 365}


class WebService:
    """Shared by every activity of a worker (``Services.web``) or by the HTTP service."""

    PROFILES: dict[str, FetchLimits] = {
        # codai web_fetch: 10 s, 3 MB, at most 3 redirects (each checked), other hosts followed.
        "codai": FetchLimits(
            timeout_s=10.0,
            max_bytes=3 * 1024 * 1024,
            max_redirects=3,
            follow_other_hosts=True,
            accept=accepted_type,
        ),
        # RTC webFetch: 60 s, 10 MB; a redirect to another host is returned to the model, not followed.
        "rtc": FetchLimits(
            timeout_s=60.0,
            max_bytes=10 * 1024 * 1024,
            max_redirects=5,
            follow_other_hosts=False,
            accept=accepted_type,
            fail_over_size=True,
        ),
    }

    def __init__(
        self,
        config: WebConfig,
        store: Store | None,
        *,
        resolver: Resolver | None = None,
        clock: Callable[[], float] = time.time,
        profiles: dict[str, FetchLimits] | None = None,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.config = config
        self.clock = clock
        self.fetcher = GuardedFetcher(
            allow_loopback=config.allow_loopback, resolver=resolver, user_agent=config.user_agent, verify=verify
        )
        self.engine_client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.engine_timeout_s),
            follow_redirects=True,
            headers={"User-Agent": config.user_agent, "Accept-Language": "en;q=0.9,*;q=0.5"},
            transport=httpx.AsyncHTTPTransport(retries=0),
        )
        self.breaker = CircuitBreaker(base_s=config.breaker_base_s, max_s=config.breaker_max_s)
        self.cache = WebCache(store, clock=clock)
        self.primary: list[SearchEngine] = [e for n in config.search_engines if (e := build_engine(n, config))]
        self.fallback: list[SearchEngine] = [e for n in config.fallback_engines if (e := build_engine(n, config))]
        self.profiles = {**self.PROFILES, **(profiles or {})}

    async def aclose(self) -> None:
        """Close the HTTP clients; the store is its maker's to close."""
        await self.fetcher.aclose()
        await self.engine_client.aclose()

    # ----- fetch pipeline ---------------------------------------------------------------------------

    async def page(self, url: str, *, profile: FetchProfile = "codai") -> tuple[Page, bool]:
        """Fetch and extract one page, through the cache. Returns (page, cached)."""
        kind = "page" if profile == "codai" else "page_rtc"
        ttl = self.config.fetch_cache_s if profile == "codai" else self.config.rtc_fetch_cache_s
        try:
            check_url(url, allow_loopback=self.fetcher.allow_loopback)  # refuse before even reading the cache
        except UrlRefused as exc:
            raise WebError(
                "bad_request", str(exc), http_status=400, details={"url": url, "reason": exc.reason}
            ) from exc
        key = normalize_url(url)
        hit = await self.cache.get(kind, key)
        if hit is not None:
            return Page.model_validate(hit), True
        try:
            raw = await self.fetcher.fetch(url, self.profiles[profile])
        except FetchError as exc:
            raise _from_fetch_error(exc) from exc
        now = dt.datetime.fromtimestamp(self.clock(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if raw.redirect_to:
            page = Page(
                url=url,
                final_url=raw.final_url,
                status=raw.status,
                content_type="",
                fetched_at=now,
                redirect_to=raw.redirect_to,
            )
            await self.cache.put(kind, key, page.model_dump(), ttl)
            return page, False
        if not 200 <= raw.status < 300:
            raise WebError(
                "upstream_error",
                f"{raw.final_url} answered HTTP {raw.status}",
                http_status=502,
                details={"status": raw.status, "url": raw.final_url},
            )
        # Imported with the first page: the extraction stack (lxml, trafilatura, markdownify) weighs tens of
        # MB in a worker that may never fetch one.
        from agent_tools._web.extractor import extract_document

        # Parsing is CPU-bound (lxml, trafilatura): a thread keeps the worker's event loop responsive.
        extracted = await asyncio.to_thread(extract_document, raw.text(), raw.content_type, raw.final_url)
        page = Page(
            url=url,
            final_url=raw.final_url,
            status=raw.status,
            content_type=raw.content_type or "text/html",
            **extracted.model_dump(),
            bytes=len(raw.body),
            body_truncated=raw.truncated,
            fetched_at=now,
        )
        await self.cache.put(kind, key, page.model_dump(), ttl)
        return page, False

    async def web_fetch(self, args: WebFetchArgs) -> FetchResponse:
        """The codai fetch face (``web_fetch``, ``POST /v1/tools/fetch``)."""
        started = time.monotonic()
        url = ensure_scheme(args.url)
        page, cached = await self.page(url, profile="codai")
        content = page.markdown if args.format == "markdown" else markdown_to_text(page.markdown)
        if args.focus and args.focus.strip():
            content, truncated = focus_window(content, args.focus, args.max_chars)
        else:
            content, truncated = truncate(content, args.max_chars)
        return FetchResponse(
            url=url,
            final_url=page.final_url,
            title=page.title,
            byline=page.byline,
            description=page.description,
            canonical=page.canonical,
            lang=page.lang,
            content_type=page.content_type,
            content=content,
            chars=len(content),
            truncated=truncated or page.body_truncated,
            took_ms=int((time.monotonic() - started) * 1000),
            cached=cached,
            published_at=page.published_at,
        )

    async def http_fetch(self, args: HttpFetchArgs) -> HttpFetchResult:
        """The raw response under the same guard: no extraction, no cache, any content type."""
        url = ensure_scheme(args.url)
        limits = FetchLimits(timeout_s=10.0, max_bytes=3 * 1024 * 1024, max_redirects=3, follow_other_hosts=True)
        try:
            raw = await self.fetcher.fetch(url, limits, method=args.method, headers=args.headers)
        except FetchError as exc:
            raise _from_fetch_error(exc) from exc
        textual = (
            accepted_type(raw.content_type)
            or raw.content_type.startswith("text/")
            or raw.content_type in ("application/javascript", "application/x-www-form-urlencoded")
        )
        body = raw.text() if textual else f"(binary {raw.content_type} body of {len(raw.body)} bytes not shown)"
        body, cut = truncate(body, args.max_chars)
        keep = (
            "content-type",
            "content-length",
            "last-modified",
            "etag",
            "cache-control",
            "location",
            "date",
            "content-language",
            "link",
            "x-ratelimit-remaining",
            "retry-after",
        )
        return HttpFetchResult(
            url=url,
            final_url=raw.final_url,
            status=raw.status,
            content_type=raw.content_type,
            headers={k: v for k, v in raw.headers.items() if k.lower() in keep},
            body=body,
            bytes=len(raw.body),
            truncated=cut or raw.truncated,
            took_ms=raw.took_ms,
        )

    # ----- search -----------------------------------------------------------------------------------

    async def search_engines(
        self,
        query: EngineQuery,
        *,
        group: Literal["primary", "fallback"] = "primary",
        want_engines: int = 1,
        enough: int = 1,
    ) -> GroupResult:
        engines = self.primary if group == "primary" else self.fallback
        layer = SearchLayer(engines, self.breaker, self.engine_client, timeout_s=self.config.engine_timeout_s)
        return await layer.run(query, want_engines=want_engines, enough=enough)

    async def search_rtc(self, query: str, *, max_results: int, time_range: str | None) -> SearchOutcome:
        """The RTC face (webSearch): failover over the primary group, no filters, cached 10 minutes."""
        started = time.monotonic()
        extra = {"face": "rtc", "max_results": max_results, "time_range": time_range}
        cached = await self.cache.get("search", query, extra)
        if cached is not None:
            return SearchOutcome.model_validate({**cached, "cached": True})
        group = await self.search_engines(
            EngineQuery(query=query, max_results=max_results, time_range=time_range), enough=max_results
        )
        outcome = SearchOutcome(
            query=query,
            results=group.hits[:max_results],
            engines_tried=group.tried,
            engines_failed=group.failed,
            engines_skipped=group.skipped,
            took_ms=int((time.monotonic() - started) * 1000),
        )
        self._raise_if_unavailable(outcome, self.primary)
        if outcome.results:
            await self.cache.put("search", query, outcome.model_dump(), self.config.search_cache_s, extra)
        return outcome

    def _raise_if_unavailable(self, outcome: SearchOutcome, engines: list[SearchEngine]) -> None:
        if outcome.results:
            return
        if not engines:
            raise WebError("search_unavailable", "no search engine is configured", http_status=503)
        answered = set(outcome.engines_tried) - {f.engine for f in outcome.engines_failed}
        if not answered:
            failed = "; ".join(f"{f.engine}: {f.reason}" for f in outcome.engines_failed)
            skipped = ", ".join(outcome.engines_skipped)
            detail = (f" (failed: {failed})" if failed else "") + (
                f" (resting after failures: {skipped})" if skipped else ""
            )
            raise WebError(
                "search_unavailable",
                f"no search engine answered{detail}",
                http_status=503,
                details={
                    "engines_tried": outcome.engines_tried,
                    "engines_failed": [f.model_dump() for f in outcome.engines_failed],
                    "engines_skipped": outcome.engines_skipped,
                },
            )

    def _filter(self, hits: list[SearchHit], args: WebSearchArgs) -> list[SearchHit]:
        after = args.published_after
        before = args.published_before
        if args.freshness:
            cutoff = (
                dt.datetime.fromtimestamp(self.clock(), dt.UTC) - dt.timedelta(days=_FRESHNESS_DAYS[args.freshness])
            ).strftime("%Y-%m-%d")
            after = max(after or cutoff, cutoff)
        out: list[SearchHit] = []
        for hit in hits:
            if not passes_domain_filters(hit.url, args.include_domains, args.exclude_domains):
                continue
            if after or before:
                # Any date filter drops pages whose publish date is unknown: a crawl date never stands in.
                if not hit.published_at:
                    continue
                day = hit.published_at[:10]
                if (after and day < after) or (before and day >= before):
                    continue
            out.append(hit)
        return out

    @staticmethod
    def engine_query_text(args: WebSearchArgs) -> str:
        """The user's query with its operators untouched, plus site: operators for the domain lists."""
        q = args.query
        lowered = q.lower()
        if args.include_domains and "site:" not in lowered:
            sites = [f"site:{rule_host(d)}" for d in args.include_domains]
            q += " " + (sites[0] if len(sites) == 1 else "(" + " OR ".join(sites) + ")")
        for d in args.exclude_domains or []:
            if f"-site:{rule_host(d)}" not in lowered:
                q += f" -site:{rule_host(d)}"
        return q

    async def web_search(self, args: WebSearchArgs) -> SearchOutcome:
        """The codai face (web_search, ``POST /v1/tools/search``)."""
        started = time.monotonic()
        extra = {"face": "codai", **args.model_dump(exclude={"query"})}
        cached = await self.cache.get("search", args.query, extra)
        if cached is not None:
            return SearchOutcome.model_validate({**cached, "cached": True})
        deep = args.depth == "deep"
        # codai: lang and country left unset are inferred from the query (in a thread: the identifier's
        # model loads on first use, and classifying is CPU work).
        lang, country = args.lang, args.country
        if lang is None or country is None:
            lang, country = await asyncio.to_thread(infer_market, args.query, lang=lang, country=country)
        eq = EngineQuery(
            query=self.engine_query_text(args),
            max_results=max(10, args.max_results * 2),
            time_range=args.freshness,
            lang=lang,
            country=country,
        )
        primary_engines = self.fallback if args.mode == "google" else self.primary
        group = await self.search_engines(
            eq,
            group="fallback" if args.mode == "google" else "primary",
            want_engines=2 if deep else 1,
            enough=args.max_results,
        )
        relaxed = relax_query(eq.query)
        if deep and relaxed and relaxed != eq.query:
            # deep: one query rewrite (quotes and operators dropped, domain rules kept) widens recall.
            extra_group = await self.search_engines(
                EngineQuery(
                    query=relaxed,
                    max_results=eq.max_results,
                    time_range=eq.time_range,
                    lang=eq.lang,
                    country=eq.country,
                ),
                group="fallback" if args.mode == "google" else "primary",
                enough=args.max_results,
            )
            group.hits = merge_hits([group.hits, extra_group.hits])
            group.tried += [e for e in extra_group.tried if e not in group.tried]
            group.failed += [f for f in extra_group.failed if f not in group.failed]
        results = self._filter(group.hits, args)
        outcome = SearchOutcome(
            query=args.query,
            results=results,
            engines_tried=group.tried,
            engines_failed=group.failed,
            engines_skipped=group.skipped,
        )
        if not group.hits:
            self._raise_if_unavailable(outcome, primary_engines)
        if (
            args.mode == "codai"
            and args.fallback == "auto"
            and self.fallback
            and len(results) < min(self.config.thin_results, args.max_results)
        ):
            second = await self.search_engines(eq, group="fallback", enough=args.max_results)
            seen = {normalize_url(h.url) for h in results}
            outcome.secondary = [h for h in self._filter(second.hits, args) if normalize_url(h.url) not in seen]
            outcome.secondary = outcome.secondary[: args.max_results]
            outcome.secondary_engines = second.answered
            outcome.engines_tried += [e for e in second.tried if e not in outcome.engines_tried]
            outcome.engines_failed += second.failed
            if outcome.secondary:
                outcome.notes.append("fallback_block")
        outcome.results = outcome.results[: args.max_results]
        if args.content_chars > 0 or deep:
            outcome.results = await self.verify(outcome.results, args.query, args.content_chars)
            outcome.notes.append("verified_against_live_pages")
        if (args.published_after or args.published_before or args.freshness) and len(outcome.results) < len(group.hits):
            outcome.notes.append("dropped_results_without_known_date_or_outside_window")
        outcome.took_ms = int((time.monotonic() - started) * 1000)
        if outcome.results or outcome.secondary:
            await self.cache.put("search", args.query, outcome.model_dump(), self.config.search_cache_s, extra)
        return outcome

    async def verify(
        self, hits: list[SearchHit], query: str, content_chars: int, *, budget_s: float = 8.0
    ) -> list[SearchHit]:
        """Fetch each result page (cached, guarded), mark the snippet verified when the live page contains
        it, and cut a query-focused excerpt of ``content_chars``. Pages that fail stay unverified."""

        async def one(hit: SearchHit) -> SearchHit:
            try:
                page, _ = await self.page(hit.url, profile="codai")
            except WebError:
                return hit
            text = markdown_to_text(page.markdown)
            update: dict[str, Any] = {
                "verified": snippet_on_page(hit.snippet, text),
                "crawled_at": page.fetched_at,
            }
            if not hit.published_at and page.published_at:
                update["published_at"] = page.published_at  # explicit page metadata, never a guess
            if content_chars > 0:
                excerpt, _ = focus_window(text, f"{query} {hit.snippet}", content_chars)
                update["content"] = excerpt
            return hit.model_copy(update=update)

        tasks = [asyncio.ensure_future(one(h)) for h in hits]
        done, pending = await asyncio.wait(tasks, timeout=budget_s) if tasks else (set(), set())
        for task in pending:
            task.cancel()
        if pending:  # let the cancelled fetches unwind (close sockets, release store connections)
            await asyncio.gather(*pending, return_exceptions=True)
        return [
            t.result() if t in done and not t.cancelled() and t.exception() is None else h
            for t, h in zip(tasks, hits, strict=True)
        ]


def snippet_on_page(snippet: str, page_text: str) -> bool:
    """True when most of the snippet's word 3-grams occur on the page (engines trim and re-space snippets,
    so an exact substring test would fail on honest results)."""
    fragments = [f for f in snippet.replace("…", "...").split("...") if f.strip()]
    snippet_words = [w for f in fragments for w in words(f)]
    if len(snippet_words) < 3:
        return bool(snippet_words) and all(w in set(words(page_text)) for w in snippet_words)
    page_words = words(page_text)
    page_grams = {tuple(page_words[i : i + 3]) for i in range(len(page_words) - 2)}
    grams = [tuple(snippet_words[i : i + 3]) for i in range(len(snippet_words) - 2)]
    return sum(1 for g in grams if g in page_grams) >= 0.6 * len(grams)


_OPERATOR = re.compile(r"(?<!\S)-?(filetype|intitle|inurl|after|before|lang):\S+", re.I)


def relax_query(query: str) -> str:
    """The deep-search rewrite: quotes, exclusions and field operators dropped; site: rules kept (they carry
    the caller's domain filter)."""
    q = _OPERATOR.sub(" ", query).replace('"', " ")
    q = re.sub(r"(?<!\S)-(?!site:)\w\S*", " ", q)
    return " ".join(q.split())
