"""The search engine layer against real HTTP servers that answer like SearXNG, DuckDuckGo, Bing, Tavily
and Brave, including their failure shapes; then the web_search face's filters, verification and cache."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import pytest

from agent_tools._errors import WebError
from agent_tools._web.service import snippet_on_page
from agent_tools.contracts._web.models import EngineFailure, SearchHit, WebSearchArgs
from agent_tools.contracts._web.render import render_search
from agent_tools.contracts._web.urls import domain_rule_matches, normalize_url, unwrap_redirect
from tests.support.web import (
    ALL,
    BING_CAPTCHA,
    Reply,
    Request,
    WebServer,
    close_web,
    engines_config,
    json_reply,
    make_web,
    searxng_results,
)


def ddg_html(results: list[tuple[str, str, str]], *, ad: bool = True) -> str:
    items = []
    if ad:
        items.append(
            '<div class="result results_links result--ad"><div class="links_main result__body"><h2 class="result__title">'
            '<a class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x">Buy now</a></h2>'
            '<a class="result__snippet" href="https://duckduckgo.com/y.js?ad_provider=x&amp;u3=1">Best prices</a></div></div>'
        )
    for url, title, snippet in results:
        href = "//duckduckgo.com/l/?uddg=" + quote(url, safe="") + "&amp;rut=abc"
        # DuckDuckGo's HTML endpoint as ddgs parses it: the result body holds the title and the snippet link.
        items.append(
            f'<div class="result results_links results_links_deep web-result "><div class="links_main links_deep '
            f'result__body"><h2 class="result__title"><a rel="nofollow" class="result__a" href="{href}">{title}</a>'
            f'</h2><div class="result__extras"><span class="result__url">{url}</span></div>'
            f'<a class="result__snippet" href="{href}">{snippet}</a><div class="clear"></div></div></div>'
        )
    return f"<html><body><div id='links' class='results'>{''.join(items)}</div></body></html>"


def bing_html(results: list[tuple[str, str, str]]) -> str:
    items = []
    for url, title, snippet in results:
        enc = "a1" + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
        href = f"https://www.bing.com/ck/a?!&amp;&amp;p=abc&amp;u={enc}&amp;ntb=1"
        items.append(
            f'<li class="b_algo"><h2><a href="{href}">{title}</a></h2><div class="b_caption">'
            f'<p class="b_lineclamp2">{snippet}</p></div></li>'
        )
    return f"<html><body><ol id='b_results'>{''.join(items)}</ol></body></html>"


DDG_CAPTCHA = (
    "<html><body><div class='anomaly-modal__title'>Unfortunately, bots use DuckDuckGo too.</div>"
    "<form id='challenge-form' action='/anomaly.js'></form></body></html>"
)


async def test_each_engine_normalises_its_results(tmp_path: Path) -> None:
    with WebServer() as server:
        b = server.base
        server.route("/searx/search", json_reply(searxng_results(b, 2, prefix="sx")))
        server.route("/ddg/html/", Reply(body=ddg_html([(f"{b}/dd?x=1&y=2", "Duck <b>one</b>", "A &amp; B")])))
        server.route("/bing/search", Reply(body=bing_html([(f"{b}/bg", "Bing one", "Mar 4, 2025 · The snippet")])))
        server.route(
            "/tavily/search",
            json_reply({"results": [{"title": "Tav", "url": f"{b}/tv", "content": "tav content", "score": 0.9}]}),
        )
        server.route(
            "/brave/search",
            json_reply(
                {
                    "web": {
                        "results": [
                            {
                                "title": "Br<strong>ave</strong>",
                                "url": f"{b}/br",
                                "description": "<strong>bold</strong> text",
                                "age": "2 days ago",
                                "page_age": "2026-02-01T09:00:00",
                            }
                        ]
                    }
                }
            ),
        )
        got: dict[str, list[SearchHit]] = {}
        for name in ALL:
            web = await make_web(tmp_path, **engines_config(server, [name]))
            try:
                got[name] = (await web.search_rtc(f"query {name}", max_results=10, time_range="week")).results
            finally:
                await close_web(web)
        reqs = {r.path: r for r in server.requests}
    assert [h.title for h in got["searxng"]] == ["Result sx0", "Result sx1"]
    assert got["searxng"][0].snippet == "Snippet 0 & more" and got["searxng"][0].published_at == "2026-01-01T10:00:00Z"
    assert reqs["/searx/search"].query["format"] == ["json"] and reqs["/searx/search"].query["time_range"] == ["week"]
    assert got["duckduckgo"] == [
        SearchHit(title="Duck one", url=f"{b}/dd?x=1&y=2", snippet="A & B", source="duckduckgo")
    ]
    assert b"df=w" in reqs["/ddg/html/"].body
    bing = got["bing"][0]
    assert (bing.url, bing.snippet, bing.published_at) == (f"{b}/bg", "The snippet", "2025-03-04T00:00:00Z")
    assert reqs["/bing/search"].query["filters"] == ['ex1:"ez2"']
    assert got["tavily"][0].published_at is None and got["tavily"][0].source == "tavily"
    assert reqs["/tavily/search"].headers["Authorization"] == "Bearer tvly-test"
    assert json.loads(reqs["/tavily/search"].body)["time_range"] == "week"
    brave = got["brave"][0]
    assert (brave.title, brave.snippet, brave.published_at) == ("Brave", "bold text", "2026-02-01T09:00:00Z")
    assert reqs["/brave/search"].headers["X-Subscription-Token"] == "brave-test"
    assert reqs["/brave/search"].query["freshness"] == ["pw"]


async def test_failover_through_every_failure_shape(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route(
            "/searx/search",
            json_reply({"results": [], "unresponsive_engines": [["google", "timeout"], ["bing", "CAPTCHA"]]}),
        )
        server.route("/ddg/html/", Reply(status=202, body=""))
        server.route("/bing/search", Reply(body=BING_CAPTCHA))
        server.route("/tavily/search", json_reply({"error": "limit"}, status=429, **{"Retry-After": "120"}))
        server.route(
            "/brave/search",
            json_reply(
                {"web": {"results": [{"title": "Survivor", "url": f"{server.base}/ok", "description": "made it"}]}}
            ),
        )
        web = await make_web(tmp_path, **engines_config(server))
        try:
            outcome = await web.search_rtc("failover", max_results=5, time_range=None)
        finally:
            await close_web(web)
    assert [h.title for h in outcome.results] == ["Survivor"]
    assert outcome.engines_tried == ALL
    reasons = {f.engine: f.reason for f in outcome.engines_failed}
    assert set(reasons) == {"searxng", "duckduckgo", "bing", "tavily"}
    assert "unresponsive" in reasons["searxng"] and "google (timeout)" in reasons["searxng"]
    assert reasons["duckduckgo"] == "rate limited (202)"
    assert "CAPTCHA" in reasons["bing"]
    assert reasons["tavily"] == "rate limited (429)"


async def test_duckduckgo_captcha_page_and_http_errors_fail_over(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/ddg/html/", Reply(body=DDG_CAPTCHA))
        server.route("/searx/search", Reply(status=500, body="boom"))
        server.route("/bing/search", Reply(body=bing_html([(f"{server.base}/x", "X", "x")])))
        web = await make_web(tmp_path, **engines_config(server, ["searxng", "duckduckgo", "bing"]))
        try:
            outcome = await web.search_rtc("captcha", max_results=1, time_range=None)
        finally:
            await close_web(web)
    assert outcome.results[0].source == "bing"
    assert [(f.engine, f.reason) for f in outcome.engines_failed] == [
        ("searxng", "HTTP 500"),
        ("duckduckgo", "CAPTCHA / bot challenge"),
    ]


async def test_circuit_breaker_rests_a_failed_engine(tmp_path: Path) -> None:
    now = [100.0]
    with WebServer() as server:
        server.route("/searx/search", Reply(status=429, body="slow down"))
        server.route("/ddg/html/", Reply(body=ddg_html([(f"{server.base}/d", "D", "d")])))
        web = await make_web(tmp_path, **engines_config(server, ["searxng", "duckduckgo"], breaker_base_s=30))
        web.breaker.clock = lambda: now[0]
        try:
            first = await web.search_rtc("one", max_results=1, time_range=None)
            second = await web.search_rtc("two", max_results=1, time_range=None)
            assert first.engines_tried == ["searxng", "duckduckgo"]
            assert second.engines_skipped == ["searxng"] and second.engines_tried == ["duckduckgo"]
            assert server.hits("/searx/search") == 1
            now[0] += 31
            third = await web.search_rtc("three", max_results=1, time_range=None)
            assert third.engines_tried == ["searxng", "duckduckgo"] and server.hits("/searx/search") == 2
            # a second failure doubles the rest period
            now[0] += 31
            fourth = await web.search_rtc("four", max_results=1, time_range=None)
            assert fourth.engines_skipped == ["searxng"]
            server.route("/searx/search", json_reply(searxng_results(server.base, 1)))
            now[0] += 31
            fifth = await web.search_rtc("five", max_results=1, time_range=None)
            assert fifth.results[0].source == "searxng" and not web.breaker.is_open("searxng")
        finally:
            await close_web(web)


async def test_no_engine_answering_is_search_unavailable(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/searx/search", Reply(status=503))
        server.route("/ddg/html/", Reply(status=202))
        server.route("/bing/search", Reply(body="<html>ok</html>", delay_s=1.5))
        web = await make_web(
            tmp_path, **engines_config(server, ["searxng", "duckduckgo", "bing"], engine_timeout_s=0.5)
        )
        try:
            with pytest.raises(WebError) as info:
                await web.web_search(WebSearchArgs(query="nothing"))
            assert info.value.code == "search_unavailable" and info.value.http_status == 503
            failed = {f["engine"]: f["reason"] for f in info.value.details["engines_failed"]}
            assert failed["bing"].startswith("timeout") and failed["searxng"] == "HTTP 503"
            with pytest.raises(WebError) as again:  # every engine now resting: still unavailable, fast
                await web.web_search(WebSearchArgs(query="nothing again"))
            assert again.value.details["engines_skipped"] == ["searxng", "duckduckgo", "bing"]
        finally:
            await close_web(web)
    unconfigured = await make_web(tmp_path, search_engines=["searxng"])  # no SearXNG URL
    try:
        with pytest.raises(WebError) as none:
            await unconfigured.web_search(WebSearchArgs(query="x"))
        assert none.value.code == "search_unavailable"
    finally:
        await close_web(unconfigured)


async def test_empty_answer_is_not_a_failure_but_next_engine_is_asked(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/searx/search", json_reply({"results": [], "unresponsive_engines": []}))
        server.route("/ddg/html/", Reply(body=ddg_html([(f"{server.base}/d", "D", "d")])))
        web = await make_web(tmp_path, **engines_config(server, ["searxng", "duckduckgo"]))
        try:
            outcome = await web.search_rtc("rare", max_results=3, time_range=None)
        finally:
            await close_web(web)
    assert outcome.engines_failed == [] and outcome.engines_tried == ["searxng", "duckduckgo"]
    assert [h.url for h in outcome.results] == [f"{server.base}/d"]


async def test_deep_merges_engines_and_deduplicates(tmp_path: Path) -> None:
    with WebServer() as server:
        b = server.base
        server.route(
            "/searx/search",
            json_reply(
                {
                    "results": [
                        {"url": f"{b}/same?utm_source=x", "title": "Same", "content": "s"},
                        {"url": f"{b}/only-searx", "title": "Only", "content": "o"},
                    ]
                }
            ),
        )
        server.route("/ddg/html/", Reply(body=ddg_html([(f"{b}/same/", "Same again", "dup"), (f"{b}/ddg", "G", "g")])))
        web = await make_web(tmp_path, **engines_config(server, ["searxng", "duckduckgo"]))
        try:
            fast = await web.web_search(WebSearchArgs(query="dedup", max_results=2))
            deep = await web.web_search(WebSearchArgs(query="dedup", max_results=10, depth="deep"))
        finally:
            await close_web(web)
    assert fast.engines_tried == ["searxng"]
    assert deep.engines_tried == ["searxng", "duckduckgo"]
    assert [h.title for h in deep.results] == ["Same", "Only", "G"]


async def test_web_search_filters_operators_and_cache(tmp_path: Path) -> None:
    def searx(req: Request) -> Reply:
        rows = [
            {
                "url": "https://docs.example.com/a",
                "title": "docs sub",
                "content": "x",
                "publishedDate": "2026-02-01",
            },
            {"url": "https://example.com/b", "title": "root", "content": "x", "publishedDate": "2025-06-01"},
            {
                "url": "https://github.com/vercel/next.js",
                "title": "gh next",
                "content": "x",
                "publishedDate": "2026-01-10",
            },
            {
                "url": "https://github.com/vercel-labs/x",
                "title": "gh labs",
                "content": "x",
                "publishedDate": "2026-01-10",
            },
            {
                "url": "https://spam.example.com/c",
                "title": "spam",
                "content": "x",
                "publishedDate": "2026-02-02",
            },
            {"url": "https://undated.example.com/d", "title": "undated", "content": "x"},
        ]
        return json_reply({"results": rows})

    with WebServer() as server:
        server.route("/searx/search", searx)
        web = await make_web(tmp_path, **engines_config(server, ["searxng"]))
        try:
            inc = await web.web_search(
                WebSearchArgs(
                    query="q1",
                    include_domains=["example.com", "github.com/vercel"],
                    exclude_domains=["spam.example.com"],
                )
            )
            dated = await web.web_search(
                WebSearchArgs(query="q2 site:x.org", published_after="2026-01-01", published_before="2026-02-02")
            )
            again = await web.web_search(
                WebSearchArgs(
                    query="q1",
                    include_domains=["example.com", "github.com/vercel"],
                    exclude_domains=["spam.example.com"],
                )
            )
            other_args = await web.web_search(WebSearchArgs(query="q1", max_results=4))
        finally:
            await close_web(web)
        sent = [r.query["q"][0] for r in server.requests if r.path == "/searx/search"]
    assert [h.title for h in inc.results] == ["docs sub", "root", "gh next", "undated"]
    assert sent[0] == "q1 (site:example.com OR site:github.com) -site:spam.example.com"
    assert sent[1] == "q2 site:x.org"  # operators pass through untouched
    assert [h.title for h in dated.results] == ["docs sub", "gh next", "gh labs"]  # undated dropped
    assert again.cached and not inc.cached and len(sent) == 3 and not other_args.cached


async def test_content_chars_verifies_snippets_on_the_live_page(tmp_path: Path) -> None:
    with WebServer() as server:
        b = server.base
        server.page("/news", "news")
        server.page("/blog", "blog")
        server.route(
            "/searx/search",
            json_reply(
                {
                    "results": [
                        {
                            "url": f"{b}/news",
                            "title": "Tram",
                            "content": "The line will have 19 stops and is expected to carry "
                            "around 42,000 passengers a day",
                        },
                        {
                            "url": f"{b}/blog",
                            "title": "SQLite",
                            "content": "An invented snippet about kangaroos in Vienna parks",
                        },
                        {"url": f"{b}/missing", "title": "Gone", "content": "whatever it said"},
                    ]
                }
            ),
        )
        web = await make_web(tmp_path, **engines_config(server, ["searxng"]))
        try:
            out = await web.web_search(WebSearchArgs(query="tram passengers stops", content_chars=300))
        finally:
            await close_web(web)
    news, blog, gone = out.results
    assert news.verified and news.content and "19 stops" in news.content and len(news.content) <= 300
    assert news.published_at == "2026-03-12T08:30:00+01:00" and news.crawled_at  # from the page's own metadata
    assert not blog.verified and blog.published_at == "2025-09-02"
    assert not gone.verified and gone.content is None


async def test_thin_results_add_a_fallback_block(tmp_path: Path) -> None:
    with WebServer() as server:
        b = server.base
        server.route("/searx/search", json_reply({"results": [{"url": f"{b}/one", "title": "One", "content": "1"}]}))
        server.route(
            "/brave/search",
            json_reply(
                {
                    "web": {
                        "results": [
                            {"title": "One dup", "url": f"{b}/one", "description": "1"},
                            {"title": "Extra", "url": f"{b}/extra", "description": "2"},
                        ]
                    }
                }
            ),
        )
        web = await make_web(tmp_path, **engines_config(server, ["searxng"], fallback_engines=["brave"]))
        try:
            out = await web.web_search(WebSearchArgs(query="thin"))
            off = await web.web_search(WebSearchArgs(query="thin", fallback="off"))
            google = await web.web_search(WebSearchArgs(query="thin", mode="google"))
        finally:
            await close_web(web)
    assert [h.title for h in out.results] == ["One"] and [h.title for h in out.secondary] == ["Extra"]
    assert out.secondary_engines == ["brave"] and off.secondary == []
    assert [h.source for h in google.results] == ["brave", "brave"]
    text = render_search(
        "thin",
        out.results,
        engines_tried=out.engines_tried,
        engines_failed=[],
        secondary=out.secondary,
        secondary_engines=out.secondary_engines,
    )
    assert "[S1] One" in text and "[G1] Extra" in text and "[S2]" not in text


def test_render_s_lines() -> None:
    hits = [
        SearchHit(
            title="A",
            url="https://a.example/x",
            snippet="alpha  text",
            source="searxng",
            published_at="2026-01-02T00:00:00Z",
            verified=True,
        ),
        SearchHit(title="B", url="https://b.example/", snippet="", source="bing"),
    ]
    text = render_search(
        "q",
        hits,
        engines_tried=["searxng", "bing"],
        engines_failed=[EngineFailure(engine="duckduckgo", reason="rate limited (202)")],
    )
    lines = text.splitlines()
    assert lines[0] == (
        'Search results for "q": 2 result(s); engines tried: searxng, bing; failed: duckduckgo (rate limited (202))'
    )
    assert lines[2] == "[S1] A"
    assert lines[3] == "    https://a.example/x  (searxng, published 2026-01-02, verified)"
    assert lines[4] == "    alpha text"
    assert lines[5] == "[S2] B"


def test_url_helpers() -> None:
    assert unwrap_redirect("//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.com%2Fx%3Fy%3D1&rut=z") == "https://a.com/x?y=1"
    enc = base64.urlsafe_b64encode(b"https://b.org/p").decode().rstrip("=")
    assert unwrap_redirect(f"https://www.bing.com/ck/a?!&&p=1&u=a1{enc}&ntb=1") == "https://b.org/p"
    assert unwrap_redirect("https://www.google.com/url?q=https://c.net/&sa=U") == "https://c.net/"
    assert normalize_url("HTTPS://WWW.Example.com:443/a/?utm_source=x&b=1#frag") == "https://example.com/a?b=1"
    assert domain_rule_matches("https://api.github.com/x", "github.com")
    assert domain_rule_matches("https://github.com/vercel/next.js", "github.com/vercel")
    assert not domain_rule_matches("https://github.com/vercel-labs/x", "github.com/vercel")
    assert not domain_rule_matches("https://notgithub.com/", "github.com")


def test_snippet_verification_tolerates_trimming() -> None:
    page = "The quick brown fox jumps over the lazy dog near the river bank today."
    assert snippet_on_page("quick brown fox jumps over the lazy dog ...", page)
    assert snippet_on_page("... The quick brown fox jumps … the river bank today", page)
    assert not snippet_on_page("A slow green turtle sleeps under the busy bridge", page)


def test_relax_query_for_deep_rewrites() -> None:
    from agent_tools._web.service import relax_query

    assert relax_query('"react compiler" release -beta filetype:pdf site:react.dev') == (
        "react compiler release site:react.dev"
    )
    assert relax_query("plain words") == "plain words"


async def test_deep_runs_the_rewritten_query_too(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/searx/search", json_reply(searxng_results(server.base, 2)))
        web = await make_web(tmp_path, **engines_config(server, ["searxng"]))
        try:
            await web.web_search(WebSearchArgs(query='"exact phrase" -noise', depth="deep"))
        finally:
            await close_web(web)
        sent = [r.query["q"][0] for r in server.requests if r.path == "/searx/search"]
    assert sent == ['"exact phrase" -noise', "exact phrase"]


async def test_verification_has_a_time_budget(tmp_path: Path) -> None:
    import time

    with WebServer() as server:
        server.route("/slow", Reply(body="<p>the snippet text is here</p>", delay_s=2.0))
        server.page("/fast", "news")
        web = await make_web(tmp_path)
        try:
            hits = [
                SearchHit(title="slow", url=server.url("/slow"), snippet="the snippet text is here", source="x"),
                SearchHit(title="fast", url=server.url("/fast"), snippet="The line will have 19 stops", source="x"),
            ]
            started = time.monotonic()
            out = await web.verify(hits, "stops", 100, budget_s=0.8)
            elapsed = time.monotonic() - started
        finally:
            await close_web(web)
    assert elapsed < 1.8
    assert [h.verified for h in out] == [False, True] and out[0].content is None and out[1].content


def test_ddgs_region_from_the_query_market() -> None:
    from agent_tools._web.engines import EngineQuery, ddgs_region

    assert ddgs_region(EngineQuery("q"), "wt-wt") == "wt-wt"
    assert ddgs_region(EngineQuery("q", lang="de", country="AT"), "wt-wt") == "at-de"
    assert ddgs_region(EngineQuery("q", lang="en-GB"), "us-en") == "gb-en"
    assert ddgs_region(EngineQuery("q", lang="fr"), "us-en") == "us-fr"
    assert ddgs_region(EngineQuery("q", country="JP"), "us-en") == "jp-en"


async def test_ddgs_engines_send_their_requests_to_the_configured_endpoint(tmp_path: Path) -> None:
    """DuckDuckGo and Bing run on ddgs: its request (form or query, region, time filter) reaches the
    configured URL, and its parser reads the page; the redirect links come back unwrapped."""
    from agent_tools.contracts._web.models import WebSearchArgs

    with WebServer() as server:
        b = server.base
        server.route("/ddg/html/", Reply(body=ddg_html([(f"{b}/d?a=1&b=2", "Duck", "quack")])))
        server.route("/bing/search", Reply(body=bing_html([(f"{b}/bg", "Bing", "Jan 5, 2026 · Snip")])))
        for name in ("duckduckgo", "bing"):
            web = await make_web(tmp_path, **engines_config(server, [name]))
            try:
                out = await web.web_search(WebSearchArgs(query=f"tram works {name}", lang="de", country="AT"))
            finally:
                await close_web(web)
            assert out.results[0].source == name
        ddg = next(r for r in server.requests if r.path == "/ddg/html/")
        bing = next(r for r in server.requests if r.path == "/bing/search")
    assert out.results[0].url == f"{b}/bg" and out.results[0].published_at == "2026-01-05T00:00:00Z"
    form = parse_qs(ddg.body.decode())
    assert (
        ddg.method == "POST" and form["q"] == ["tram works duckduckgo"] and form["l"] == ["at-de"] and "df" not in form
    )
    assert bing.method == "GET" and bing.query["q"] == ["tram works bing"] and bing.query["cc"] == ["de"]
    assert "Mozilla/5.0" in ddg.headers.get("user-agent", ddg.headers.get("User-Agent", ""))


@pytest.mark.parametrize(
    ("engine", "path", "page", "reason"),
    [
        ("duckduckgo", "/ddg/html/", Reply(status=429, body="slow"), "rate limited (429)"),
        ("duckduckgo", "/ddg/html/", Reply(status=503, body="down"), "HTTP 503"),
        ("duckduckgo", "/ddg/html/", Reply(body=DDG_CAPTCHA), "CAPTCHA / bot challenge"),
        ("searxng", "/searx/search", json_reply([1, 2, 3]), "malformed response (not a JSON object)"),
        ("searxng", "/searx/search", Reply(body="<html>", content_type="text/html"), "malformed response (not JSON)"),
    ],
)
async def test_single_engine_failure_shapes(tmp_path: Path, engine: str, path: str, page: Reply, reason: str) -> None:
    with WebServer() as server:
        server.route(path, page)
        web = await make_web(tmp_path, **engines_config(server, [engine]))
        try:
            with pytest.raises(WebError) as info:
                await web.search_rtc("q", max_results=3, time_range=None)
        finally:
            await close_web(web)
    assert info.value.details["engines_failed"] == [{"engine": engine, "reason": reason}]


async def test_ddgs_connection_refused_is_an_engine_failure(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    web = await make_web(tmp_path, search_engines=["bing"], bing_url=f"http://127.0.0.1:{port}/search")
    try:
        with pytest.raises(WebError) as info:
            await web.search_rtc("q", max_results=3, time_range=None)
    finally:
        await close_web(web)
    assert info.value.details["engines_failed"][0]["reason"].startswith("connection failed (")


HOSTILE_ROWS = [
    ("javascript:alert(1)", "JS", "x"),
    ("https://ok.example/" + "a" * 3000, "Too long", "x"),
    ("https://ok.example/nul\x00", "NUL", "x"),
    ("https://ok.example/fine", "T\x00itle \ud800 " + "w" * 5000, "s" * 50_000),
]


async def test_junk_result_rows_are_dropped_or_normalised(tmp_path: Path) -> None:
    with WebServer() as server:
        rows = [{"url": u, "title": t, "content": c} for u, t, c in HOSTILE_ROWS] + [
            {"url": 5, "title": ["x"], "content": {"a": 1}},
            "not an object",
            {"title": "no url"},
        ]
        server.route("/searx/search", json_reply({"results": rows, "unresponsive_engines": "junk"}))
        server.route("/brave/search", json_reply({"web": [1, 2, 3]}))
        server.route(
            "/ddg/html/",
            Reply(body=ddg_html([(u, t.replace("\ud800", ""), c) for u, t, c in HOSTILE_ROWS[:3]]) + "\x00" * 1000),
        )
        got: dict[str, Any] = {}
        for name in ("searxng", "brave", "duckduckgo"):
            web = await make_web(tmp_path, **engines_config(server, [name]))
            try:
                got[name] = await web.search_rtc(f"junk {name}", max_results=10, time_range=None)
            except WebError as exc:
                got[name] = exc
            finally:
                await close_web(web)
    (only,) = got["searxng"].results
    assert only.url == "https://ok.example/fine" and len(only.title) <= 500 and len(only.snippet) <= 2000
    assert "\x00" not in only.title and "\ud800" not in only.title
    # an API answer of the wrong shape is "no results", a result page of junk rows too: nothing crashes
    for name in ("brave", "duckduckgo"):
        assert got[name].results == [] and got[name].engines_failed == [] and got[name].engines_tried == [name]


def test_unwrap_decoded_duckduckgo_links() -> None:
    # ddgs percent-decodes the whole link: the target's own "&" survive, DuckDuckGo's "&rut=" goes.
    assert unwrap_redirect("//duckduckgo.com/l/?uddg=https://a.com/x?y=1&z=2&rut=abc") == "https://a.com/x?y=1&z=2"
    assert unwrap_redirect("/l/?uddg=https%3A%2F%2Fb.com%2F&rut=z") == "https://b.com/"
    assert (
        unwrap_redirect("https://notduckduckgo.com/l/?uddg=https://x") == "https://notduckduckgo.com/l/?uddg=https://x"
    )


@pytest.mark.parametrize(
    ("query", "market"),
    [
        ("Wie funktioniert eine Wärmepumpe", ("de", "DE")),
        ("restaurants près de la gare", ("fr", "FR")),
        ("Jak ugotować pierogi ruskie", ("pl", "PL")),
        ("東京の天気", ("ja", "JP")),
        ("서울 날씨", ("ko", "KR")),
        ("¿cuál es la capital de Australia?", ("es", None)),  # many Spanish-speaking markets: none named
        ("Which EU countries require B2B e-invoicing in 2026?", ("en", None)),
        ("python asyncio tutorial", (None, None)),  # not confident: nothing inferred
        ("東京 天気", (None, None)),  # kanji only: Japanese or Chinese
        ("site:bahn.de Streik", (None, "DE")),
        ("site:gov.uk strike dates", (None, "GB")),
        ("site:github.io docs", (None, None)),  # a vanity country domain
        ("site:gov.uk OR site:bahn.de strike", (None, None)),  # two countries: none
        ("lang:fr voitures électriques", ("fr", "FR")),
        ("x", (None, None)),
        ("2026", (None, None)),
        ("\ud800\udfff \x00\x00 lone surrogates", (None, None)),
        ("word " * 80, (None, None)),
    ],
)
def test_market_inferred_from_the_query(query: str, market: tuple[str | None, str | None]) -> None:
    from agent_tools._web.market import infer_market

    assert infer_market(query) == market


def test_given_market_is_never_overridden() -> None:
    from agent_tools._web.market import infer_market

    assert infer_market("Wie funktioniert eine Wärmepumpe", lang="en") == ("en", None)
    assert infer_market("Wie funktioniert eine Wärmepumpe", country="AT") == ("de", "AT")
    assert infer_market("site:bahn.de Streik", lang="de", country="CH") == ("de", "CH")


async def test_web_search_sends_the_inferred_market_to_the_engines(tmp_path: Path) -> None:
    with WebServer() as server:
        b = server.base
        server.route("/searx/search", json_reply(searxng_results(b, 2)))
        server.route("/ddg/html/", Reply(body=ddg_html([(f"{b}/d", "D", "d")])))
        server.route(
            "/brave/search", json_reply({"web": {"results": [{"title": "B", "url": f"{b}/b", "description": "b"}]}})
        )
        server.route("/tavily/search", json_reply({"results": [{"title": "T", "url": f"{b}/t", "content": "t"}]}))
        for name in ("searxng", "duckduckgo", "brave", "tavily"):
            web = await make_web(tmp_path, **engines_config(server, [name]))
            try:
                await web.web_search(WebSearchArgs(query=f"東京の天気 {name}"))
                await web.web_search(WebSearchArgs(query=f"東京の天気 {name}", lang="en", country="US"))
            finally:
                await close_web(web)
        by_path = {
            p: [r for r in server.requests if r.path == p]
            for p in ("/searx/search", "/ddg/html/", "/brave/search", "/tavily/search")
        }
    assert [r.query["language"] for r in by_path["/searx/search"]] == [["ja"], ["en"]]
    assert [parse_qs(r.body.decode())["l"] for r in by_path["/ddg/html/"]] == [["jp-ja"], ["us-en"]]
    brave = [(r.query["search_lang"], r.query["country"]) for r in by_path["/brave/search"]]
    assert brave == [(["jp"], ["jp"]), (["en"], ["us"])]  # Brave's own code for Japanese
    assert [json.loads(r.body).get("country") for r in by_path["/tavily/search"]] == ["japan", "united states"]


async def test_search_cache_lasts_ten_minutes(tmp_path: Path) -> None:
    """Both faces: a repeated search within 10 minutes is served from the cache (no engine call), one
    after 10 minutes asks the engines again. Time is the service's clock."""
    now = [3_000_000.0]
    with WebServer() as server:
        server.route("/searx/search", json_reply(searxng_results(server.base, 3)))
        web = await make_web(tmp_path, clock=lambda: now[0], **engines_config(server, ["searxng"]))
        try:
            first = await web.web_search(WebSearchArgs(query="cache me"))
            rtc_first = await web.search_rtc("cache me", max_results=3, time_range=None)
            now[0] += 10 * 60 - 1
            second = await web.web_search(WebSearchArgs(query="cache me"))
            rtc_second = await web.search_rtc("cache me", max_results=3, time_range=None)
            assert server.hits("/searx/search") == 2  # one per face: their keys differ
            now[0] += 2
            third = await web.web_search(WebSearchArgs(query="cache me"))
            rtc_third = await web.search_rtc("cache me", max_results=3, time_range=None)
        finally:
            await close_web(web)
        hits = server.hits("/searx/search")
    assert (first.cached, second.cached, third.cached) == (False, True, False)
    assert (rtc_first.cached, rtc_second.cached, rtc_third.cached) == (False, True, False)
    assert second.results == first.results and hits == 4


async def test_every_engine_down_is_search_unavailable_on_both_faces(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/searx/search", Reply(status=500, body="boom"))
        server.route("/ddg/html/", Reply(status=202, body=""))
        server.route("/bing/search", Reply(body=BING_CAPTCHA))
        server.route("/tavily/search", json_reply({"error": "quota"}, status=429))
        server.route("/brave/search", Reply(status=503, body="down"))
        web = await make_web(tmp_path, **engines_config(server))
        try:
            with pytest.raises(WebError) as codai:
                await web.web_search(WebSearchArgs(query="anything at all"))
            web.breaker = type(web.breaker)()  # fresh breakers: the RTC face asks every engine too
            with pytest.raises(WebError) as rtc:
                await web.search_rtc("anything at all", max_results=5, time_range=None)
        finally:
            await close_web(web)
    for info in (codai, rtc):
        assert info.value.code == "search_unavailable" and info.value.http_status == 503
        assert [f["engine"] for f in info.value.details["engines_failed"]] == ALL
