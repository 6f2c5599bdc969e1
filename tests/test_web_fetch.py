"""The fetch pipeline on a real HTTP server: extraction, limits, content types, redirects, cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tools._errors import WebError
from agent_tools._web.fetcher import FetchLimits
from agent_tools._web.service import accepted_type
from agent_tools.contracts._web.models import HttpFetchArgs, WebFetchArgs
from agent_tools.contracts._web.text import markdown_to_text, word_f1
from tests.support.web import PAGES, Reply, WebServer, close_web, json_reply, make_web


async def test_article_comes_back_without_the_menus(tmp_path: Path) -> None:
    with WebServer() as server:
        server.page("/news", "news")
        web = await make_web(tmp_path)
        try:
            page = await web.web_fetch(WebFetchArgs(url=server.url("/news"), max_chars=40_000))
        finally:
            await close_web(web)
    assert page.title and page.title.startswith("City council approves new tram line")
    assert page.byline == "Maria Lindqvist"
    assert page.published_at == "2026-03-12T08:30:00+01:00"
    assert page.canonical == "https://gazette.example/news/2026/03/tram-line-approved"
    assert page.lang == "en" and page.content_type == "text/html"
    assert "## Cost and funding" in page.content
    for boilerplate in ("Most read", "We use cookies", "Subscribe", "All rights reserved", "Related stories"):
        assert boilerplate not in page.content
    assert page.chars == len(page.content) and not page.truncated and not page.cached
    _, _, f1 = word_f1(markdown_to_text(page.content), (PAGES / "news.txt").read_text())
    assert f1 > 0.95


@pytest.mark.parametrize("name", ["news", "docs", "blog", "forum", "table", "code", "magazine", "wiki", "divsoup"])
async def test_fixture_set_extraction_f1(tmp_path: Path, name: str) -> None:
    with WebServer() as server:
        server.page(f"/{name}", name)
        web = await make_web(tmp_path)
        try:
            page = await web.web_fetch(WebFetchArgs(url=server.url(f"/{name}"), max_chars=40_000, format="text"))
        finally:
            await close_web(web)
    _, _, f1 = word_f1(page.content, (PAGES / f"{name}.txt").read_text())
    assert f1 >= 0.9, (name, f1)


async def test_markdown_keeps_tables_code_and_absolute_links(tmp_path: Path) -> None:
    with WebServer() as server:
        server.page("/table", "table")
        server.page("/code", "code")
        server.page("/docs/guide/", "docs")
        web = await make_web(tmp_path)
        try:
            table = await web.web_fetch(WebFetchArgs(url=server.url("/table"), max_chars=40_000))
            code = await web.web_fetch(WebFetchArgs(url=server.url("/code"), max_chars=40_000))
        finally:
            await close_web(web)
    assert "| Model | Battery (kWh) | WLTP range (km) | Our test (km) | Price (EUR) |" in table.content
    assert "| Nordwind Aero | 82 | 610 | 455 | 53,500 |" in table.content
    assert "```rust\nuse clap::{Parser, Subcommand};\n\n/// Keep notes" in code.content
    assert "```bash\ncargo add clap --features derive\n```" in code.content
    assert "[clap](https://docs.rs/clap)" in code.content


async def test_focus_text_format_and_max_chars(tmp_path: Path) -> None:
    with WebServer() as server:
        server.page("/news", "news")
        web = await make_web(tmp_path)
        try:
            focused = await web.web_fetch(WebFetchArgs(url=server.url("/news"), focus="budget funding loan euros"))
            text = await web.web_fetch(WebFetchArgs(url=server.url("/news"), format="text"))
            short = await web.web_fetch(WebFetchArgs(url=server.url("/news"), max_chars=200))
        finally:
            await close_web(web)
    assert "610 million euros" in focused.content and "## Cost and funding" in focused.content
    assert "Harbour Street" not in focused.content and focused.truncated
    # the headline is the title field, not repeated as the content's first line
    assert "##" not in text.content and text.content.startswith("The city council voted 31 to 18")
    assert short.chars <= 200 and short.truncated
    assert short.cached and text.cached  # same URL: one download


async def test_fetch_cache_is_shared_and_expires(tmp_path: Path) -> None:
    now = [1_000_000.0]
    with WebServer() as server:
        server.page("/blog", "blog")
        web = await make_web(tmp_path, clock=lambda: now[0])
        other = await make_web(tmp_path, clock=lambda: now[0])  # a second worker on the same store
        try:
            first = await web.web_fetch(WebFetchArgs(url=server.url("/blog")))
            second = await other.web_fetch(WebFetchArgs(url=server.url("/blog") + "#comments"))
            assert not first.cached and second.cached and server.hits("/blog") == 1
            now[0] += 15 * 60 - 1  # still within the 15 minutes
            assert (await web.web_fetch(WebFetchArgs(url=server.url("/blog")))).cached
            now[0] += 2
            third = await web.web_fetch(WebFetchArgs(url=server.url("/blog")))
            assert not third.cached and server.hits("/blog") == 2
        finally:
            await close_web(web)
            await close_web(other)


async def test_scheme_prepended_and_refused_urls_are_bad_request(tmp_path: Path) -> None:
    web = await make_web(tmp_path, allow_loopback=False)
    try:
        for url in ("localhost/x", "127.0.0.1:1/", "http://u:p@example.com/", "file:///etc/passwd"):
            with pytest.raises(WebError) as info:
                await web.web_fetch(WebFetchArgs(url=url))
            assert info.value.code == "bad_request" and info.value.http_status == 400, url
    finally:
        await close_web(web)


async def test_upstream_errors_are_502_with_status_and_url(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/gone", Reply(status=404, body="nope"))
        server.route("/boom", Reply(status=503, body="down"))
        web = await make_web(tmp_path)
        try:
            for path, status in (("/gone", 404), ("/boom", 503)):
                with pytest.raises(WebError) as info:
                    await web.web_fetch(WebFetchArgs(url=server.url(path)))
                assert info.value.code == "upstream_error" and info.value.http_status == 502
                assert info.value.details == {"status": status, "url": server.url(path)}
            with pytest.raises(WebError) as refused:
                await web.web_fetch(WebFetchArgs(url="http://127.0.0.1:1/closed"))
            assert refused.value.code == "upstream_error"
        finally:
            await close_web(web)


async def test_content_type_gate(tmp_path: Path) -> None:
    assert all(
        accepted_type(t)
        for t in (
            "text/html; charset=utf-8",
            "application/xhtml+xml",
            "text/plain",
            "application/json",
            "text/markdown",
            "application/xml",
            "text/xml",
            "application/ld+json",
            "application/atom+xml",
            "",
        )
    )
    assert not any(
        accepted_type(t)
        for t in ("image/png", "application/pdf", "application/octet-stream", "video/mp4", "application/zip")
    )
    with WebServer() as server:
        server.route("/img", Reply(body=b"\x89PNG....", content_type="image/png"))
        server.route("/data", json_reply({"name": "x", "items": [1, 2]}))
        server.route("/notes.md", Reply(body="# Notes\n\n* one\n* two\n", content_type="text/markdown"))
        server.route(
            "/feed",
            Reply(body="<?xml version='1.0'?><rss><item>a</item></rss>", content_type="application/xml"),
        )
        web = await make_web(tmp_path)
        try:
            with pytest.raises(WebError) as info:
                await web.web_fetch(WebFetchArgs(url=server.url("/img")))
            # codai's set: an unreadable type is the upstream's answer being unusable (502 upstream_error).
            assert info.value.code == "upstream_error" and info.value.http_status == 502
            assert info.value.details["content_type"] == "image/png" and info.value.details["status"] == 200
            data = await web.web_fetch(WebFetchArgs(url=server.url("/data")))
            assert data.content.startswith("```json\n") and json.loads(data.content[8:-4]) == {
                "name": "x",
                "items": [1, 2],
            }
            md = await web.web_fetch(WebFetchArgs(url=server.url("/notes.md")))
            assert md.content.startswith("# Notes") and md.content_type == "text/markdown"
            xml = await web.web_fetch(WebFetchArgs(url=server.url("/feed")))
            assert "<item>a</item>" in xml.content
        finally:
            await close_web(web)


async def test_redirects_at_most_three_each_followed(tmp_path: Path) -> None:
    with WebServer() as server:
        for i in range(1, 5):
            server.route(f"/r{i}", Reply(status=302, headers={"Location": f"/r{i + 1}"}))
        server.page("/r5", "blog")
        server.route("/s1", Reply(status=301, headers={"Location": "/s2"}))
        server.route("/s2", Reply(status=307, headers={"Location": server.url("/r4")}))
        web = await make_web(tmp_path)
        try:
            with pytest.raises(WebError) as info:
                await web.web_fetch(WebFetchArgs(url=server.url("/r1")))  # 4 redirects
            assert info.value.code == "upstream_error" and "redirects" in info.value.message
            page = await web.web_fetch(WebFetchArgs(url=server.url("/s1")))  # 3 redirects
            assert page.final_url == server.url("/r5") and page.url == server.url("/s1")
            assert "WAL mode" in page.content
        finally:
            await close_web(web)


async def test_rtc_follows_five_same_host_redirects_and_refuses_a_sixth(tmp_path: Path) -> None:
    with WebServer() as server:
        for i in range(1, 7):
            server.route(f"/h{i}", Reply(status=302, headers={"Location": f"/h{i + 1}"}))
        server.page("/h7", "docs")
        web = await make_web(tmp_path)
        try:
            # Five hops (/h2 to /h7) are followed; a sixth is not.
            page, _ = await web.page(server.url("/h2"), profile="rtc")
            assert page.redirect_to is None and "When a task raises an exception" in page.markdown
            with pytest.raises(WebError) as info:
                await web.page(server.url("/h1"), profile="rtc")
            assert info.value.code == "upstream_error" and "more than 5 redirects" in info.value.message
            assert server.hits("/h7") == 1
        finally:
            await close_web(web)


async def test_body_cap_timeout_and_rtc_size_limit(tmp_path: Path) -> None:
    big = ("word " * 1000 + "\n\n") * 800  # ~4 MB of text
    with WebServer() as server:
        server.route("/big.txt", Reply(body=big, content_type="text/plain"))
        server.route("/slow", Reply(body="<p>late</p>", delay_s=2.0))
        web = await make_web(
            tmp_path,
            profiles={
                "codai": FetchLimits(timeout_s=0.5, max_bytes=3 * 1024 * 1024, max_redirects=3, accept=accepted_type),
                "rtc": FetchLimits(
                    timeout_s=5,
                    max_bytes=1024 * 1024,
                    follow_other_hosts=False,
                    accept=accepted_type,
                    fail_over_size=True,
                ),
            },
        )
        try:
            page, _ = await web.page(server.url("/big.txt"), profile="codai")
            assert page.body_truncated and page.bytes == 3 * 1024 * 1024
            with pytest.raises(WebError) as slow:
                await web.web_fetch(WebFetchArgs(url=server.url("/slow")))
            assert slow.value.code == "upstream_error" and "timed out" in slow.value.message
            with pytest.raises(WebError) as large:
                await web.page(server.url("/big.txt"), profile="rtc")
            assert large.value.code == "too_large"
        finally:
            await close_web(web)


async def test_rtc_profile_returns_other_host_redirects(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/same", Reply(status=302, headers={"Location": "/docs"}))
        server.route("/away", Reply(status=301, headers={"Location": f"http://localhost:{server.port}/docs"}))
        server.page("/docs", "docs")
        web = await make_web(tmp_path)
        try:
            same, _ = await web.page(server.url("/same"), profile="rtc")
            assert same.redirect_to is None and "When a task raises an exception" in same.markdown
            away, _ = await web.page(server.url("/away"), profile="rtc")
            assert away.redirect_to == f"http://localhost:{server.port}/docs" and away.markdown == ""
            assert server.hits("/docs") == 1
        finally:
            await close_web(web)


async def test_http_fetch_returns_the_raw_response(tmp_path: Path) -> None:
    with WebServer() as server:
        server.route("/api", json_reply({"ok": True}, status=201, ETag='"v1"'))
        server.route("/bin", Reply(body=b"\x00\x01\x02", content_type="application/octet-stream"))
        web = await make_web(tmp_path)
        try:
            got = await web.http_fetch(HttpFetchArgs(url=server.url("/api"), headers={"Accept": "application/json"}))
            assert got.status == 201 and json.loads(got.body) == {"ok": True} and got.headers["etag"] == '"v1"'
            assert [r.headers.get("Accept") for r in server.requests if r.path == "/api"] == ["application/json"]
            head = await web.http_fetch(HttpFetchArgs(url=server.url("/api"), method="HEAD"))
            assert head.body == "" and head.status == 201
            binary = await web.http_fetch(HttpFetchArgs(url=server.url("/bin")))
            assert "binary application/octet-stream body of 3 bytes" in binary.body
        finally:
            await close_web(web)
        web = await make_web(tmp_path, allow_loopback=False)
        try:
            with pytest.raises(WebError) as info:
                await web.http_fetch(HttpFetchArgs(url=server.url("/api")))
            assert info.value.code == "bad_request"
        finally:
            await close_web(web)


async def test_charsets_from_header_or_meta(tmp_path: Path) -> None:
    body = (
        "<html><head><meta charset='windows-1252'><title>Caf\u00e9</title></head><body><article><p>"
        + ("Cr\u00e8me br\u00fbl\u00e9e at the caf\u00e9 costs \u20ac5. " * 20)
        + "</p></article></body></html>"
    )
    with WebServer() as server:
        server.route("/meta", Reply(body=body.encode("cp1252"), content_type="text/html"))
        server.route(
            "/header",
            Reply(
                body=body.replace("windows-1252", "utf-8").encode("iso-8859-15"),
                content_type="text/html; charset=iso-8859-15",
            ),
        )
        web = await make_web(tmp_path)
        try:
            meta = await web.web_fetch(WebFetchArgs(url=server.url("/meta")))
            header = await web.web_fetch(WebFetchArgs(url=server.url("/header")))
        finally:
            await close_web(web)
    for page in (meta, header):
        assert "Cr\u00e8me br\u00fbl\u00e9e at the caf\u00e9 costs \u20ac5." in page.content
        assert page.title == "Caf\u00e9"


def test_truncation_closes_an_open_code_fence() -> None:
    from agent_tools.contracts._web.text import truncate

    md = "Intro paragraph.\n\n```python\n" + "\n".join(f"line_{i} = {i}" for i in range(200)) + "\n```\n\nAfter."
    cut, truncated = truncate(md, 300)
    assert truncated and len(cut) <= 300 and cut.endswith("\n```")
    assert sum(1 for ln in cut.split("\n") if ln.startswith("```")) == 2
    assert truncate("short", 300) == ("short", False)


async def test_rtc_cache_lasts_thirty_minutes(tmp_path: Path) -> None:
    now = [2_000_000.0]
    with WebServer() as server:
        server.page("/docs", "docs")
        web = await make_web(tmp_path, clock=lambda: now[0])
        try:
            _, first = await web.page(server.url("/docs"), profile="rtc")
            now[0] += 29 * 60
            _, second = await web.page(server.url("/docs"), profile="rtc")
            _, codai = await web.page(server.url("/docs"), profile="codai")  # separate entry, separate limits
            now[0] += 2 * 60
            _, third = await web.page(server.url("/docs"), profile="rtc")
        finally:
            await close_web(web)
    assert (first, second, codai, third) == (False, True, False, False)
    assert server.hits("/docs") == 3


async def test_layout_tables_noise_and_dropped_headings(tmp_path: Path) -> None:
    with WebServer() as server:
        for name in ("divsoup", "wiki", "magazine"):
            server.page(f"/{name}", name)
        web = await make_web(tmp_path)
        try:
            soup, wiki, mag = [
                (await web.web_fetch(WebFetchArgs(url=server.url(f"/{n}"), max_chars=40_000))).content
                for n in ("divsoup", "wiki", "magazine")
            ]
        finally:
            await close_web(web)
    # a layout table is page structure, not a data table
    assert "|" not in soup and "Cheap tools here" not in soup and "Popular tips" not in soup
    assert "\n\nSecond, push a plastic drain snake" in soup
    # edit links, citation markers, table of contents, navbox and categories are gone; the data table stays
    for noise in ("[edit]", "cite_note", "Contents", "Towns and municipalities", "Categories:"):
        assert noise not in wiki, noise
    assert "| Population (2024) | 18,240 |" in wiki and "## History" in wiki
    # headings the extractor dropped come back before their paragraphs
    assert "## Who rides at night\n\nSurveys by the operators" in mag
    assert "## Can it pay its way?\n\nThe economics remain difficult" in mag
    assert "Comments (38)" not in mag and "More from Travel" not in mag


@pytest.mark.parametrize("name", ["news", "docs", "blog", "table", "code"])
def test_readability_style_fallback_when_trafilatura_finds_nothing(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import trafilatura

    from agent_tools._web import extractor

    # The extractor imports trafilatura on first use; patching the module patches what it will call.
    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: None)
    out = extractor.extract_html((PAGES / f"{name}.html").read_text(), f"https://fixture.example/{name}")
    assert out.extractor == "fallback"
    _, _, f1 = word_f1(markdown_to_text(out.markdown), (PAGES / f"{name}.txt").read_text())
    assert f1 > 0.85, (name, f1)
    for noise in ("Privacy", "Subscribe", "Most read", "Recent posts"):
        assert noise not in out.markdown, (name, noise)


HIGHLIGHTED = [
    (
        '<div class="highlight"><pre><span></span><span class="k">def</span> <span class="nf">foo</span>'
        '<span class="p">(</span><span class="n">x</span><span class="p">):</span>\n    <span class="k">return</span>'
        ' <span class="n">x</span><span class="o">+</span><span class="mi">1</span>\n\n<span class="nb">print</span>'
        '<span class="p">(</span><span class="n">foo</span><span class="p">(</span><span class="mi">2</span>'
        '<span class="p">))</span>\n</pre></div>',
        "```\ndef foo(x):\n    return x+1\n\nprint(foo(2))\n```",
    ),
    (
        '<div class="highlight-python notranslate"><div class="highlight"><pre><span class="k">import</span> '
        '<span class="nn">os</span>\n<span class="nb">print</span><span class="p">(</span><span class="n">os</span>'
        '<span class="p">.</span><span class="n">sep</span><span class="p">)</span>\n</pre></div></div>',
        "```python\nimport os\nprint(os.sep)\n```",
    ),
    (
        '<div class="highlight highlight-source-js"><pre><span class="pl-k">const</span> x <span class="pl-c1">=</span>'
        " 1;\n\nconsole.log(x);</pre></div>",
        "```js\nconst x = 1;\n\nconsole.log(x);\n```",
    ),
    (
        '<pre class="language-go"><code>package main\n\nfunc main() {}</code></pre>',
        "```go\npackage main\n\nfunc main() {}\n```",
    ),
    ('<pre><code class="hljs language-sql">SELECT 1;</code></pre>', "```sql\nSELECT 1;\n```"),
]


@pytest.mark.parametrize(("code_html", "fenced"), HIGHLIGHTED)
def test_highlighted_code_keeps_its_text_and_language(code_html: str, fenced: str) -> None:
    from agent_tools._web.extractor import extract_html

    intro = "<p>Some intro paragraph text that is long enough to be kept by the extractor, yes indeed.</p>"
    outro = "<p>Another paragraph of explanation text after the code block, long enough to matter.</p>"
    md = extract_html(
        f"<html><body><article><h1>T</h1>{intro}{code_html}{outro}</article></body></html>", "http://x/"
    ).markdown
    assert fenced in md


def test_focus_window_ranks_paragraphs_and_respects_the_budget() -> None:
    from agent_tools.contracts._web.text import focus_window

    md = "\n\n".join(
        ["# Guide", "## Install", "Run pip install to get the package."]
        + [f"Filler paragraph {i} about unrelated gardening topics and tomatoes." for i in range(30)]
        + ["## Retries", "Retries use exponential backoff with jitter; set max_attempts to limit them."]
        + [f"More filler {i} on cooking pasta." for i in range(30)]
    )
    text, cut = focus_window(md, "retry backoff max_attempts", 200)
    assert cut and len(text) <= 200
    assert text.startswith("## Retries\n\nRetries use exponential backoff")
    wide, _ = focus_window(md, "install package retries backoff", 400)
    assert "Run pip install" in wide and "exponential backoff" in wide and "…" in wide and len(wide) <= 400
    for budget in (200, 250, 300, 500, 1000):
        assert len(focus_window(md, "filler tomatoes pasta", budget)[0]) <= budget


async def test_xhtml_with_xml_declaration_and_bom(tmp_path: Path) -> None:
    para = "An XHTML page still has an article, and it must come back as text. " * 4
    body = (
        '\ufeff<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
        '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml" lang="de">'
        f'<head><title>XHTML</title></head><body><div id="nav"><a href="/">Home</a></div><div class="post"><h1>Kopf</h1>'
        f"<p>{para}</p></div></body></html>"
    )
    with WebServer() as server:
        server.route("/x", Reply(body=body.encode("utf-8"), content_type="application/xhtml+xml; charset=utf-8"))
        web = await make_web(tmp_path)
        try:
            page = await web.web_fetch(WebFetchArgs(url=server.url("/x")))
        finally:
            await close_web(web)
    # trafilatura's title rule: a page's only <h1> is its title (before <title>, which often carries the
    # site's name too)
    assert page.title == "Kopf" and page.lang == "de" and page.content_type == "application/xhtml+xml"
    assert page.content.startswith("An XHTML page still has an article") and "<?xml" not in page.content


async def test_http_fetch_drops_credential_headers(tmp_path: Path) -> None:
    from pydantic import ValidationError

    with WebServer() as server:
        server.route("/h", Reply(body="ok", content_type="text/plain"))
        web = await make_web(tmp_path)
        try:
            await web.http_fetch(
                HttpFetchArgs(
                    url=server.url("/h"),
                    headers={
                        "Authorization": "Bearer secret",
                        "Cookie": "sid=1",
                        "Host": "evil.example",
                        "X-Trace": "t1",
                    },
                )
            )
        finally:
            await close_web(web)
        seen = next(r for r in server.requests if r.path == "/h").headers
    assert "Authorization" not in seen and "Cookie" not in seen and seen["X-Trace"] == "t1"
    assert seen["Host"] == f"127.0.0.1:{server.port}"
    with pytest.raises(ValidationError):
        HttpFetchArgs(url="https://x.org", headers={"X": "a\r\nInjected: 1"})
    with pytest.raises(ValidationError):
        HttpFetchArgs(url="https://x.org", headers={f"H{i}": "v" for i in range(21)})


async def test_default_body_caps_three_and_ten_megabytes(tmp_path: Path) -> None:
    """The service's own limits, no override: web_fetch keeps the first 3 MB of a longer body (marked
    truncated); webFetch reads up to 10 MB and refuses a larger body."""
    mb = 1024 * 1024
    line = "word " * 19 + "ends\n"  # 100 bytes
    with WebServer() as server:
        server.route("/5mb.txt", Reply(body=line * (5 * mb // 100), content_type="text/plain"))
        server.route("/over10mb.txt", Reply(body=line * (10 * mb // 100) + line, content_type="text/plain"))
        web = await make_web(tmp_path)
        try:
            codai, _ = await web.page(server.url("/5mb.txt"), profile="codai")
            rtc, _ = await web.page(server.url("/5mb.txt"), profile="rtc")
            with pytest.raises(WebError) as large:
                await web.page(server.url("/over10mb.txt"), profile="rtc")
            fetched = await web.web_fetch(WebFetchArgs(url=server.url("/5mb.txt")))
        finally:
            await close_web(web)
    assert codai.body_truncated and codai.bytes == 3 * mb
    assert not rtc.body_truncated and rtc.bytes == 5 * mb - (5 * mb) % 100
    assert large.value.code == "too_large" and large.value.http_status == 413
    assert fetched.truncated  # the cut body is reported through the face


async def test_https_is_prepended_when_the_scheme_is_missing(tmp_path: Path) -> None:
    """codai's web_fetch and http_fetch: a URL without a scheme is fetched over HTTPS (a real TLS server on
    127.0.0.1 with a test CA), never silently over plain HTTP."""
    import shutil
    import ssl

    from tests.support.web import make_certs

    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    ca, cert, key = make_certs(tmp_path)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)

    async def resolver(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    with WebServer() as server:
        server.server.socket = server_ctx.wrap_socket(server.server.socket, server_side=True)
        server.page("/doc", "docs")
        server.route("/raw", Reply(body="plain body", content_type="text/plain"))
        web = await make_web(tmp_path, resolver=resolver, verify=ssl.create_default_context(cafile=str(ca)))
        try:
            page = await web.web_fetch(WebFetchArgs(url=f"secure.test:{server.port}/doc"))
            raw = await web.http_fetch(HttpFetchArgs(url=f"  secure.test:{server.port}/raw"))
        finally:
            await close_web(web)
    assert page.url == page.final_url == f"https://secure.test:{server.port}/doc"
    assert page.title == "Configuring retries"
    assert raw.final_url == f"https://secure.test:{server.port}/raw" and raw.body == "plain body"


async def test_each_profile_reads_with_its_own_time_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """RTC's webFetch allows 60 s ("Fetch timeout: 60 seconds"), codai's web_fetch 10 s.
    The shared client's 30 s read timeout used to cut every read at 30 s; each request now carries its
    profile's limit (read off the real requests the fetcher sends)."""
    import httpx

    seen: list[dict[str, float | None]] = []
    send = httpx.AsyncClient.send

    async def recording(self: httpx.AsyncClient, request: httpx.Request, **kwargs: object) -> httpx.Response:
        seen.append(dict(request.extensions["timeout"]))
        return await send(self, request, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpx.AsyncClient, "send", recording)
    with WebServer() as server:
        server.page("/blog", "blog")
        web = await make_web(tmp_path)
        try:
            await web.page(server.url("/blog"), profile="rtc")
            await web.page(server.url("/blog") + "?again", profile="codai")
        finally:
            await close_web(web)
    assert [s["read"] for s in seen] == [60.0, 10.0]
    assert [s["connect"] for s in seen] == [10.0, 10.0]
