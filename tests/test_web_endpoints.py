"""The /v1/tools and /v1/research endpoints: bearer keys, rate limits, shapes and error envelopes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from agent_tools._service.app import create_app
from agent_tools._service.tools_routes import RateLimiter
from agent_tools._settings import Settings
from agent_tools.contracts._web.config import WebConfig
from tests.support.fixture_types import Script, WorkerFor
from tests.support.web import (
    Reply,
    WebServer,
    close_web,
    json_reply,
    make_web,
    research_script,
    searxng_results,
    serve_research,
)

KEY = {"Authorization": "Bearer key-1"}


@pytest.fixture
def server() -> Iterator[WebServer]:
    with WebServer() as s:
        yield s


@pytest_asyncio.fixture
async def api(
    tmp_path: Path, settings: Settings, server: WebServer
) -> AsyncIterator[tuple[httpx.AsyncClient, FastAPI]]:
    web = await make_web(tmp_path, search_engines=["searxng"], searxng_url=server.url("/searx"))
    now = [1000.0]
    limiter = RateLimiter(per_minute=3, per_hour=5, clock=lambda: now[0])
    app = create_app(settings, web=web, api_keys=["key-1", "key-2"], web_rate_limiter=limiter)
    app.state.clock = now
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as http:
        yield http, app
    await close_web(web)


async def test_keys_are_required(api: tuple[httpx.AsyncClient, FastAPI], settings: Settings) -> None:
    http, _ = api
    assert (await http.post("/v1/tools/fetch", json={"url": "https://x.org"})).status_code == 401
    wrong = await http.post("/v1/tools/fetch", json={"url": "https://x.org"}, headers={"Authorization": "Bearer no"})
    assert wrong.status_code == 401 and wrong.json()["error"]["type"] == "authentication_error"
    open_app = create_app(settings)  # no keys configured: closed, not open
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=open_app), base_url="http://svc") as other:
        refused = await other.post("/v1/tools/search", json={"query": "x"}, headers=KEY)
        assert refused.status_code == 401 and "no API keys" in refused.json()["error"]["message"]


async def test_search_shape_and_rate_limit_headers(api: tuple[httpx.AsyncClient, FastAPI], server: WebServer) -> None:
    http, _ = api
    server.route(
        "/searx/search",
        Reply(body=__import__("json").dumps(searxng_results(server.base, 8)), content_type="application/json"),
    )
    res = await http.post("/v1/tools/search", json={"query": " trams ", "max_results": 4}, headers=KEY)
    assert res.status_code == 200, res.text
    body = res.json()
    assert set(body) >= {"results", "provider", "took_ms", "cached", "coverage", "sources_tried", "degraded"}
    assert len(body["results"]) == 4 and body["coverage"] == 1 and body["sources_tried"] == ["searxng"]
    first = body["results"][0]
    assert set(first) >= {"title", "url", "snippet", "source", "verified", "published_at"}
    assert first["published_at"] == "2026-01-01T10:00:00Z" and first["verified"] is False
    assert res.headers["X-RateLimit-Limit"] == "3" and res.headers["X-RateLimit-Remaining"] == "2"
    assert res.headers["X-RateLimit-Reset"] == "60" and res.headers["X-RateLimit-Remaining-Hour"] == "4"


async def test_rate_limit_per_key(api: tuple[httpx.AsyncClient, FastAPI], server: WebServer) -> None:
    http, app = api
    server.page("/p", "blog")
    for _ in range(3):
        assert (await http.post("/v1/tools/fetch", json={"url": server.url("/p")}, headers=KEY)).status_code == 200
    limited = await http.post("/v1/tools/fetch", json={"url": server.url("/p")}, headers=KEY)
    assert limited.status_code == 429
    assert limited.json()["error"] == {
        "type": "rate_limit_error",
        "code": "rate_limit_exceeded",
        "message": "rate limit exceeded for this key; retry after 60 s",
    }
    assert limited.headers["X-RateLimit-Remaining"] == "0" and limited.headers["Retry-After"] == "60"
    other = await http.post(
        "/v1/tools/fetch", json={"url": server.url("/p")}, headers={"Authorization": "Bearer key-2"}
    )
    assert other.status_code == 200
    app.state.clock[0] += 61
    for _ in range(2):  # requests 4 and 5 of the hour (the refused one did not count)
        assert (await http.post("/v1/tools/fetch", json={"url": server.url("/p")}, headers=KEY)).status_code == 200
    hour = await http.post("/v1/tools/fetch", json={"url": server.url("/p")}, headers=KEY)
    assert hour.status_code == 429 and hour.headers["X-RateLimit-Remaining-Hour"] == "0"


async def test_fetch_shapes_and_errors(api: tuple[httpx.AsyncClient, FastAPI], server: WebServer) -> None:
    http, _ = api
    server.page("/news", "news")
    server.route("/404", Reply(status=404, body="x"))
    ok = await http.post(
        "/v1/tools/fetch",
        json={"url": server.url("/news"), "max_chars": 4000, "focus": "bus routes"},
        headers=KEY,
    )
    body = ok.json()
    assert ok.status_code == 200 and set(body) >= {
        "url",
        "final_url",
        "title",
        "byline",
        "description",
        "canonical",
        "lang",
        "content_type",
        "content",
        "chars",
        "truncated",
        "took_ms",
        "cached",
    }
    assert "the 4, the 11 and the 27" in body["content"] and body["chars"] == len(body["content"])
    refused = await http.post("/v1/tools/fetch", json={"url": "http://169.254.169.254/"}, headers=KEY)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_request"
    upstream = await http.post("/v1/tools/fetch", json={"url": server.url("/404")}, headers=KEY)
    assert upstream.status_code == 502
    assert upstream.json()["error"] == {
        "type": "server_error",
        "code": "upstream_error",
        "message": f"{server.url('/404')} answered HTTP 404",
        "details": {"status": 404, "url": server.url("/404")},
    }
    # A request with a bad body counts against the key's limits too, and says where the key stands.
    invalid = await http.post(
        "/v1/tools/fetch", json={"url": "x", "max_chars": 10}, headers={"Authorization": "Bearer key-2"}
    )
    assert invalid.status_code == 400 and "max_chars" in invalid.json()["error"]["message"]
    assert invalid.headers["X-RateLimit-Remaining"] == "2"
    # Without a key the body is not even looked at.
    assert (await http.post("/v1/tools/fetch", json={"url": "x", "max_chars": 10})).status_code == 401


async def test_codai_fields_and_error_set(api: tuple[httpx.AsyncClient, FastAPI], server: WebServer) -> None:
    """the search answer has codai's `intent` (and `provider`, `notes`); a content type
    codai does not read is one of its documented errors (502 upstream_error), with the rate-limit headers,
    as every answer has them, 400s included."""
    http, _ = api
    server.route("/searx/search", json_reply(searxng_results(server.base, 3)))
    res = await http.post(
        "/v1/tools/search", json={"query": "react compiler release", "include_domains": ["react.dev"]}, headers=KEY
    )
    body = res.json()
    assert res.status_code == 200 and {"provider", "intent", "notes", "degraded"} <= set(body)
    assert body["intent"] == "docs"
    server.route("/img", Reply(body=b"\x89PNG....", content_type="image/png"))
    img = await http.post("/v1/tools/fetch", json={"url": server.url("/img")}, headers=KEY)
    assert img.status_code == 502 and img.json()["error"]["code"] == "upstream_error"
    assert img.json()["error"]["details"] == {"status": 200, "url": server.url("/img"), "content_type": "image/png"}
    assert img.headers["X-RateLimit-Remaining"] == "1"
    bad = await http.post("/v1/tools/search", json={"query": ""}, headers=KEY)
    assert bad.status_code == 400 and bad.headers["X-RateLimit-Remaining"] == "0"


def test_search_intent_reads_the_query() -> None:
    from agent_tools.contracts._web.render import search_intent

    assert search_intent("TypeError: undefined is not a function") == "code"
    assert search_intent("latest news on the tram strike") == "news"
    assert search_intent("asyncio tutorial") == "docs"
    assert search_intent("best pastel de nata in lisbon") == "general"


async def test_search_unavailable_is_503(api: tuple[httpx.AsyncClient, FastAPI], server: WebServer) -> None:
    http, _ = api
    server.route("/searx/search", Reply(status=500))
    res = await http.post("/v1/tools/search", json={"query": "x"}, headers=KEY)
    assert res.status_code == 503
    assert res.json()["error"]["code"] == "search_unavailable" and res.json()["error"]["type"] == "server_error"
    bad = await http.post("/v1/tools/search", json={"query": "", "max_results": 11}, headers=KEY)
    assert bad.status_code == 400


async def test_openapi_lists_the_endpoints(api: tuple[httpx.AsyncClient, FastAPI]) -> None:
    http, _ = api
    spec = (await http.get("/openapi.json")).json()
    for path in ("/v1/tools/search", "/v1/tools/fetch", "/v1/research", "/v1/research/{job_id}"):
        assert path in spec["paths"]
    assert "WebSearchArgs" in spec["components"]["schemas"]


async def test_research_endpoints(
    settings: Settings, script: Script, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WebServer() as srv:
        serve_research(srv)
        settings.web = WebConfig(search_engines=["searxng"], searxng_url=srv.url("/searx"), allow_loopback=True)
        settings.model = research_script(script, "Nineteen stops [S1].")
        async with worker_for() as client:
            app = create_app(settings, agent_client=client, api_keys=["key-1"])
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as http:
                waited = await http.post(
                    "/v1/research", json={"question": "tram?", "max_sources": 3, "wait_s": 30}, headers=KEY
                )
                assert waited.status_code == 200, waited.text
                job = waited.json()
                assert job["status"] == "completed" and job["report"].startswith("Nineteen stops [S1].")
                assert [s["n"] for s in job["sources"]] == [1, 2, 3]
                started = await http.post(
                    "/v1/research", json={"question": "tram again?", "max_sources": 3}, headers=KEY
                )
                assert started.status_code == 202 and started.json()["status"] == "running"
                polled = await http.get(f"/v1/research/{job['id']}", headers=KEY)
                assert polled.status_code == 200 and polled.json()["report"] == job["report"]
                missing = await http.get("/v1/research/research-nope", headers=KEY)
                assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
                other = await http.get("/v1/research/session-123", headers=KEY)
                assert other.status_code == 404
                bad = await http.post("/v1/research", json={"question": "q", "time_budget_s": 5}, headers=KEY)
                assert bad.status_code == 400
                await client.research.wait(started.json()["id"], timeout_s=30)


async def test_every_engine_down_is_503_search_unavailable(tmp_path: Path, settings: Settings) -> None:
    """All five engines configured and each failing its own way: the endpoint answers 503
    search_unavailable (type server_error) and lists what every engine did."""
    from tests.support.web import BING_CAPTCHA, engines_config, json_reply

    with WebServer() as srv:
        srv.route("/searx/search", json_reply({"results": [], "unresponsive_engines": [["google", "CAPTCHA"]]}))
        srv.route("/ddg/html/", Reply(status=202, body=""))
        srv.route("/bing/search", Reply(body=BING_CAPTCHA))
        srv.route("/tavily/search", json_reply({"error": "quota"}, status=429, **{"Retry-After": "30"}))
        srv.route("/brave/search", Reply(status=500, body="down"))
        web = await make_web(tmp_path, **engines_config(srv))
        app = create_app(settings, web=web, api_keys=["key-1"])
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as http:
                res = await http.post("/v1/tools/search", json={"query": "trams everywhere"}, headers=KEY)
        finally:
            await close_web(web)
    assert res.status_code == 503
    error = res.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "search_unavailable"
    failed = {f["engine"]: f["reason"] for f in error["details"]["engines_failed"]}
    assert set(failed) == {"searxng", "duckduckgo", "bing", "tavily", "brave"}
    assert failed["duckduckgo"] == "rate limited (202)" and failed["bing"] == "CAPTCHA / bot challenge"
