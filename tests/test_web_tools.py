"""The tool faces: webSearch, webFetch, web_search, web_fetch, http_fetch, json_query, through the tool
runner (validation, error shapes, the small-model extraction) and end to end in a real session."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agent_tools._activity_io import SessionRef, ToolCallInput, ToolCallOutput
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools.activities._services import Services
from agent_tools.activities._tool_runner import run_tool
from agent_tools.activities._web_tools import IMPLEMENTATIONS
from agent_tools.contracts._web.config import WebConfig
from tests.support.fixture_types import Script, WorkerFor
from tests.support.web import Reply, WebServer, json_reply, searxng_results


@pytest.fixture
def server() -> Iterator[WebServer]:
    with WebServer() as s:
        yield s


@pytest_asyncio.fixture
async def services(settings: Settings, server: WebServer, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Services]:
    settings.web = WebConfig(search_engines=["searxng"], searxng_url=server.url("/searx"), allow_loopback=True)
    svc = await Services.open(settings)
    try:
        yield svc
    finally:
        await svc.close()


async def call(services: Services, name: str, arguments: dict[str, Any], *, threshold: int = 100_000) -> ToolCallOutput:
    ref = SessionRef(
        session_id="s-web",
        run_id="r1",
        agent="assistant",
        organisation="o",
        project="p",
        user="u",
        root_id="s-web",
        model=services.settings.default_model(),
        spill_threshold=threshold,
    )
    inp = ToolCallInput(session=ref, call_id="c1", name=name, arguments=arguments)
    return await run_tool(services, services.catalog.get(name), IMPLEMENTATIONS[name], inp)


async def test_web_fetch_face_fences_the_page(services: Services, server: WebServer) -> None:
    server.page("/docs", "docs")
    out = await call(services, "web_fetch", {"url": server.url("/docs"), "focus": "non_retryable exception types"})
    assert not out.is_error
    head, fenced = out.content.split("\n\n", 1)
    assert head.startswith(f"URL: {server.url('/docs')}\nTitle: Configuring retries")
    assert fenced.startswith("The text between the UNTRUSTED markers is third-party web content")
    assert "<<<UNTRUSTED_CONTENT " in fenced and fenced.rstrip().endswith(">>>")
    assert "non_retryable=[ValueError, PermissionError]" in fenced
    assert out.data and out.data["final_url"] == server.url("/docs") and "content" not in out.data


async def test_codai_error_lines(services: Services, server: WebServer) -> None:
    server.route("/404", Reply(status=404, body="x"))
    bad = await call(services, "web_fetch", {"url": "http://10.0.0.1/"})
    assert bad.is_error and bad.content.startswith("ERROR bad_request: refused")
    gone = await call(services, "web_fetch", {"url": server.url("/404")})
    assert gone.is_error and gone.content.startswith("ERROR upstream_error:")
    assert gone.data == {
        "code": "upstream_error",
        "http_status": 502,
        "status": 404,
        "url": server.url("/404"),
    }
    invalid = await call(services, "web_fetch", {"url": server.url("/x"), "max_chars": 50})
    assert invalid.is_error and invalid.content.startswith(
        "ERROR bad_request: invalid arguments for web_fetch: max_chars"
    )
    long_q = await call(services, "web_search", {"query": "x" * 401})
    assert long_q.is_error and "1-400 characters" in long_q.content
    blank = await call(services, "web_search", {"query": "   "})
    assert blank.is_error
    too_many = await call(services, "web_search", {"query": "q", "include_domains": [f"d{i}.com" for i in range(11)]})
    assert too_many.is_error and "at most 10 hosts" in too_many.content
    for args in (
        {"max_results": 11},
        {"max_results": 0},
        {"content_chars": 2001},
        {"depth": "deeper"},
        {"freshness": "decade"},
        {"country": "usa"},
        {"lang": "english"},
    ):
        over = await call(services, "web_search", {"query": "q", **args})
        assert over.is_error and over.content.startswith("ERROR bad_request: invalid arguments for web_search"), args
    for args in ({"focus": "f" * 301}, {"max_chars": 40_001}, {"format": "html"}, {"url": "h" * 2049}):
        over = await call(services, "web_fetch", {"url": "https://example.com/", **args})
        assert over.is_error and over.content.startswith("ERROR bad_request: invalid arguments for web_fetch"), args
    bad_date = await call(services, "web_search", {"query": "q", "published_after": "01/02/2026"})
    assert bad_date.is_error and "YYYY-MM-DD" in bad_date.content
    server.route("/searx/search", Reply(status=502))
    down = await call(services, "web_search", {"query": "anything"})
    assert down.is_error and down.content.startswith("ERROR search_unavailable: no search engine answered")


async def test_web_search_face_renders_s_lines(services: Services, server: WebServer) -> None:
    server.route("/searx/search", json_reply(searxng_results(server.base, 7)))
    out = await call(services, "web_search", {"query": "  trams  ", "max_results": 3})
    lines = out.content.splitlines()
    assert lines[0] == 'Search results for "trams": 3 result(s); engines tried: searxng'
    assert [ln.split(" ", 1)[0] for ln in lines if ln.startswith("[")] == ["[S1]", "[S2]", "[S3]"]
    assert out.data and out.data["urls"] == [f"{server.base}/r{i}" for i in range(3)]


async def test_web_search_rtc_shape_and_limits(services: Services, server: WebServer) -> None:
    server.route("/searx/search", json_reply(searxng_results(server.base, 40)))
    out = await call(services, "webSearch", {"query": "go news 2026", "max_results": 30, "time_range": "month"})
    body = json.loads(out.content)
    assert set(body) == {"query", "result_count", "results"} and body["result_count"] == 30
    assert set(body["results"][0]) == {"title", "url", "description", "source"}
    assert body["results"][0]["source"] == "searxng"
    assert out.data and out.data["engines_tried"] == ["searxng"] and out.data["engines_failed"] == []
    default = json.loads((await call(services, "webSearch", {"query": "default count"})).content)
    assert default["result_count"] == 10
    over = await call(services, "webSearch", {"query": "q", "max_results": 31})
    assert over.is_error
    bad_range = await call(services, "webSearch", {"query": "q", "time_range": "decade"})
    assert bad_range.is_error
    cached = await call(services, "webSearch", {"query": "go news 2026", "max_results": 30, "time_range": "month"})
    assert cached.data and cached.data["cached"] is True and server.hits("/searx/search") == 2


async def test_web_search_rtc_empty_time_range_is_all_time(services: Services, server: WebServer) -> None:
    """RTC's time_range "Leave empty for all time": "" is accepted and no time filter is sent."""
    server.route("/searx/search", json_reply(searxng_results(server.base, 3)))
    out = await call(services, "webSearch", {"query": "all time please", "time_range": ""})
    assert not out.is_error, out.content
    assert json.loads(out.content)["result_count"] == 3
    sent = [r for r in server.requests if r.path == "/searx/search"]
    assert len(sent) == 1 and "time_range" not in sent[0].query


async def test_webfetch_small_page_redirect_and_limits(services: Services, server: WebServer) -> None:
    server.page("/blog", "blog")
    server.route("/moved", Reply(status=301, headers={"Location": "https://elsewhere.example/post"}))
    out = await call(services, "webFetch", {"url": server.url("/blog"), "prompt": "What pragma matters?"})
    assert not out.is_error and out.data and out.data["extracted_by"] == "none"
    assert "Prompt: What pragma matters?" in out.content and "busy_timeout" in out.content
    moved = await call(services, "webFetch", {"url": server.url("/moved"), "prompt": "x"})
    assert not moved.is_error and moved.data and moved.data["redirect_url"] == "https://elsewhere.example/post"
    assert "REDIRECT DETECTED" in moved.content and 'url="https://elsewhere.example/post"' in moved.content
    too_long = await call(services, "webFetch", {"url": "https://a.example/" + "x" * 2000, "prompt": "x"})
    assert too_long.is_error
    no_scheme = await call(services, "webFetch", {"url": "example.com/page", "prompt": "x"})
    assert no_scheme.is_error and "fully-formed" in no_scheme.content
    private = await call(services, "webFetch", {"url": "http://192.168.1.1/admin", "prompt": "x"})
    assert private.is_error and "refused" in private.content


async def test_webfetch_large_page_goes_to_the_small_model(
    settings: Settings, script: Script, server: WebServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.web.allow_loopback = True
    settings.model = script(
        [
            {"match": {"role": "web_extract"}, "turns": [{"say": "EXTRACTED: 73 paragraphs about trams"}]},
            {"turns": [{"say": "main conversation"}]},
        ]
    )
    paragraphs = "".join(
        f"<p>Paragraph {i}: the tram line will carry passengers across the harbour district "
        f"every few minutes, and this sentence pads the page out to a large size.</p>"
        for i in range(600)
    )
    server.route(
        "/huge",
        Reply(body=f"<html><head><title>Huge</title></head><body><article>{paragraphs}</article></body></html>"),
    )
    svc = await Services.open(settings)
    try:
        out = await call(svc, "webFetch", {"url": server.url("/huge"), "prompt": "How often do trams run?"})
    finally:
        await svc.close()
    assert not out.is_error, out.content
    assert out.data and out.data["extracted_by"] == "model" and out.data["bytes"] > 50_000
    assert "EXTRACTED: 73 paragraphs about trams" in out.content
    assert out.usage is not None and out.usage.calls == 1 and out.usage.input_tokens > 10_000


async def test_http_fetch_and_json_query_faces(services: Services, server: WebServer) -> None:
    server.route("/api/items", json_reply({"items": [{"name": "a", "price": 3}, {"name": "b", "price": 12}]}))
    raw = await call(services, "http_fetch", {"url": server.url("/api/items")})
    assert raw.content.startswith(f"HTTP 200 {server.url('/api/items')}\n")
    assert "\ncontent-type: application/json\n" in raw.content and '{"items": [' in raw.content
    assert raw.data and raw.data["status"] == 200
    post = await call(services, "http_fetch", {"url": server.url("/api/items"), "method": "POST"})
    assert post.is_error
    doc = json.dumps({"items": [{"name": "a", "price": 3}, {"name": "b", "price": 12}]})
    q = await call(services, "json_query", {"document": doc, "query": "items[?price > `10`].name"})
    assert json.loads(q.content) == ["b"]
    q2 = await call(services, "json_query", {"document": {"a": [1, 2, 3]}, "query": "sum(a)"})
    assert json.loads(q2.content) == 6
    bad = await call(services, "json_query", {"document": {"a": 1}, "query": "a[?"})
    assert bad.is_error and bad.content.startswith("ERROR bad_request:")
    bad_doc = await call(services, "json_query", {"document": "{not json", "query": "a"})
    assert bad_doc.is_error and "not valid JSON" in bad_doc.content


async def test_web_tools_in_a_real_session(
    settings: Settings, script: Script, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WebServer() as srv:
        srv.page("/news", "news")
        srv.route("/searx/search", json_reply(searxng_results(srv.base, 3)))
        settings.web = WebConfig(search_engines=["searxng"], searxng_url=srv.url("/searx"), allow_loopback=True)
        settings.model = script(
            [
                {
                    "say": "looking",
                    "tool_calls": [
                        {"name": "webSearch", "arguments": {"query": "tram line", "max_results": 2}},
                        {"name": "web_fetch", "arguments": {"url": srv.url("/news"), "focus": "bus routes"}},
                        {"name": "web_search", "arguments": {"query": "tram line"}},
                    ],
                },
                {"say": "done: {{tool_results}}"},
            ]
        )
        async with worker_for() as client:
            handle = await client.start_session(
                "find the tram news", agent="assistant", tools=["webSearch", "web_fetch", "web_search"]
            )
            result = await handle.result()
    assert result.status == SessionStatus.completed
    final = result.final_message or ""
    assert '"result_count":2' in final
    assert "the 4, the 11 and the 27" in final
    assert "[S1] Result r0" in final


def test_cli_fetch_and_search(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from agent_tools._cli import app

    with WebServer() as srv:
        srv.page("/code", "code")
        srv.route("/searx/search", json_reply(searxng_results(srv.base, 2)))
        monkeypatch.setenv("AGENT_TOOLS_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/cli.sqlite")
        monkeypatch.setenv("AGENT_TOOLS_WEB__ALLOW_LOOPBACK", "true")
        monkeypatch.setenv("AGENT_TOOLS_WEB__SEARCH_ENGINES", '["searxng"]')
        monkeypatch.setenv("AGENT_TOOLS_WEB__SEARXNG_URL", srv.url("/searx"))
        runner = CliRunner()
        # No store yet (no worker has run): the tools work, uncached, and the CLI creates no store.
        uncached = runner.invoke(app, ["web", "fetch", srv.url("/code"), "--json"])
        assert uncached.exit_code == 0, uncached.output
        assert json.loads(uncached.stdout)["cached"] is False
        assert not (tmp_path / "cli.sqlite").exists()
        assert runner.invoke(app, ["migrate"]).exit_code == 0
        fetched = runner.invoke(app, ["web", "fetch", srv.url("/code"), "--focus", "subcommand enum"])
        searched = runner.invoke(app, ["web", "search", "clap derive", "-n", "2"])
        as_json = runner.invoke(app, ["web", "fetch", srv.url("/code"), "--json"])
        refused = runner.invoke(app, ["web", "fetch", "http://10.0.0.1/"])
    assert fetched.exit_code == 0, fetched.output
    assert "enum Command" in fetched.stdout
    assert searched.exit_code == 0 and "[S2] Result r1" in searched.stdout
    assert json.loads(as_json.stdout)["cached"] is True
    assert refused.exit_code == 1 and "ERROR bad_request: refused" in refused.output
    assert "bad_request: bad_request" not in refused.output  # the code once came twice


async def test_search_and_fetch_results_are_not_spilled(services: Services, server: WebServer) -> None:
    server.page("/news", "news")
    server.route("/searx/search", json_reply(searxng_results(server.base, 10)))
    page = await call(services, "web_fetch", {"url": server.url("/news"), "max_chars": 4000}, threshold=500)
    assert page.artifact_ref is None and "Harbour Street" in page.content
    found = await call(services, "web_search", {"query": "long", "max_results": 10}, threshold=500)
    assert found.artifact_ref is None and "[S10]" in found.content
    doc = {"rows": [{"i": i, "text": "x" * 50} for i in range(50)]}
    queried = await call(services, "json_query", {"document": doc, "query": "rows"}, threshold=500)
    assert queried.artifact_ref is not None  # json_query results spill like any tool's
