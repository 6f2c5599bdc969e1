"""Main-content extraction on the fixture set of real-world-shaped pages (tests/fixtures/extraction, built
by its build.py): the benchmark metric against trafilatura alone, each page's structure and metadata, and
the extractor's helpers on hostile input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent_tools._web.extractor import (
    _drop_title_heading,
    _restore_headings,
    code_language,
    extract_html,
    iso_date,
    metadata,
)
from agent_tools.contracts._web.text import markdown_to_text
from bench.extraction_score import (
    Case,
    evaluate,
    fixture_cases,
    ours,
    page_counts,
    score,
    trafilatura_alone,
)

CASES = list(fixture_cases())
FIXTURES = Path(__file__).parent / "fixtures" / "extraction"


def test_fixture_set_has_every_shape() -> None:
    shapes = [json.loads((FIXTURES / f"{c.name}.json").read_text())["shape"] for c in CASES]
    assert len(CASES) >= 40
    assert {s: shapes.count(s) for s in set(shapes)} == {
        "news": 7,
        "tweets": 7,
        "react": 7,
        "rails": 7,
        "blog": 7,
        "docs": 7,
    }


def test_shingle_metric() -> None:
    text = "one two three four five six"
    assert page_counts(text, text) == (1.0, 0.0, 0.0)
    assert score([page_counts(text, "")]).recall == 0.0
    tp, fp, fn = page_counts(text, "one two three four")  # 1 of 3 shingles found, nothing extra
    assert (round(tp, 3), fp, round(fn, 3)) == (0.333, 0.0, 0.667)
    half = score([page_counts(text, text), page_counts(text, "zero " + text)])
    assert half.recall == 1.0 and 0.8 < half.precision < 1.0  # pages weigh the same, whatever their length


def test_beats_trafilatura_on_the_fixture_set() -> None:
    mine, _ = evaluate(CASES, ours)
    theirs, _ = evaluate(CASES, trafilatura_alone)
    assert mine.f1 > theirs.f1, (mine, theirs)
    assert mine.f1 >= 0.98 and mine.precision >= 0.97 and mine.recall >= 0.98, mine


def _headings(md: str) -> list[str]:
    out, in_code = [], False
    for line in md.split("\n"):
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"^#{1,6}\s", line):
            out.append(re.sub(r"^#+\s+", "", line))
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_page_structure_and_metadata(case: Case) -> None:
    """Headings exactly where the article has them (none from rails, cards, newsletter or author boxes),
    code with its language, tables as Markdown tables, the page's own date or none, and the body text."""
    expected: dict[str, Any] = json.loads((FIXTURES / f"{case.name}.json").read_text())
    out = extract_html(case.html, case.url)
    assert _headings(out.markdown) == expected["headings"]
    assert re.findall(r"(?m)^```(\S*)$", out.markdown)[0::2] == expected["code_languages"]
    for header in expected["table_headers"]:
        assert header in out.markdown
    assert out.title == expected["title"]
    assert out.published_at == expected["published_at"]
    if expected["byline"]:
        assert out.byline == expected["byline"]
    text = " ".join(markdown_to_text(out.markdown).split())
    # Every paragraph whole: React's <!-- --> markers between text runs used to glue words together
    # ("Alongthe fjord") or cut the sentence at the marker.
    for block in case.truth.split("\n\n"):
        if "\n" not in block.strip():
            assert " ".join(block.split()) in text
    assert score([page_counts(case.truth, text)]).f1 >= 0.93  # ordered lists keep their numbers


def test_comment_markers_never_split_text() -> None:
    page = (
        "<html><body><article><h1>T</h1><p>When<!-- --> <!-- -->the council met on <!-- -->12<!-- --> May, "
        "it voted <?php echo 1 ?>for the plan by <!-- -->41<!-- --> votes to <!-- -->12<!-- -->, after a long "
        "debate about cost, noise and the route through the old town.</p><p>Another paragraph follows here "
        "with more words, so that the page has an article worth extracting at all.</p></article></body></html>"
    )
    md = extract_html(page, "https://x.example/").markdown
    assert "When the council met on 12 May, it voted for the plan by 41 votes to 12, after" in md


def test_heading_restore_keeps_only_article_headings() -> None:
    import lxml.html

    page = lxml.html.fromstring(
        "<html><body><article><p>Opening paragraph of the story, long enough to be kept by the extractor.</p>"
        "<h2>A real section</h2><p>The section's first paragraph, which the extractor kept as well.</p>"
        "<div class='card'><h3>An unrelated headline</h3></div><p>Third paragraph continues the story here, kept.</p>"
        "<h3><a href='/x'>A linked teaser headline</a></h3><p>Fourth paragraph of the story, also kept by it.</p>"
        "<aside><h2>In an aside</h2></aside><p>Fifth paragraph of the story, kept like the others were.</p>"
        "<h4>Before a dropped block</h4><p>This paragraph was not kept by the extractor at all, none of it.</p>"
        "<p>Sixth paragraph of the story, after the dropped one, and kept.</p></article></body></html>"
    )
    kept = [
        "Opening paragraph of the story, long enough to be kept by the extractor.",
        "The section's first paragraph, which the extractor kept as well.",
        "Third paragraph continues the story here, kept.",
        "Fourth paragraph of the story, also kept by it.",
        "Fifth paragraph of the story, kept like the others were.",
        "Sixth paragraph of the story, after the dropped one, and kept.",
    ]
    restored = _restore_headings("\n\n".join(kept), page)
    assert _headings(restored) == ["A real section"]
    assert restored.split("\n\n")[1:3] == ["## A real section", kept[1]]
    already = "\n\n".join([kept[0], "## A real section", *kept[1:]])
    assert _restore_headings(already, page) == already


def test_title_heading_dropped_only_when_it_is_the_title() -> None:
    assert _drop_title_heading("# The Title\n\nBody.", "The  title") == "Body."
    assert _drop_title_heading("# Other\n\nBody.", "The title") == "# Other\n\nBody."
    assert _drop_title_heading("# The title", "The title") == "# The title"  # nothing else would remain
    assert _drop_title_heading("## The title\n\nBody.", None) == "## The title\n\nBody."


def test_code_language_from_the_nearest_wrappers() -> None:
    import lxml.html

    def lang(markup: str) -> str | None:
        return code_language(lxml.html.fromstring(markup).xpath("//pre")[0])

    assert lang('<div class="language-toml highlight"><pre><code>x = 1</code></pre></div>') == "toml"
    assert lang('<div class="highlight-yaml notranslate"><div class="highlight"><pre>a: 1</pre></div></div>') == "yaml"
    assert lang('<div class="language-en"><div><div><pre>text</pre></div></div></div>') is None


@pytest.mark.parametrize(
    ("raw", "iso"),
    [
        ("2026-03-12T08:30:00+0100", "2026-03-12T08:30:00+01:00"),
        ("2025-09-02T10:11:12+0000", "2025-09-02T10:11:12+00:00"),
        ("2024-02-03T00:00:00", "2024-02-03"),  # htmldate's padding of a plain date: no time is made up
        ("2024-02-03T13:05:00", "2024-02-03T13:05:00"),
        (None, None),
        ("", None),
        ("yesterday", None),
        ("2024-02-03T13:05:00+0100\x00", None),
        ("9" * 10_000, None),
    ],
)
def test_iso_date(raw: str | None, iso: str | None) -> None:
    assert iso_date(raw) == iso


def _page(head: str = "", body: str = "<p>text</p>") -> Any:
    import lxml.html

    return lxml.html.document_fromstring(f"<html><head>{head}</head><body>{body}</body></html>")


def test_metadata_only_from_explicit_markup() -> None:
    undated = metadata(
        _page(
            body="<p>Posted on 3 March 2024 by admin</p><aside><time datetime='2026-01-02'>2 Jan</time></aside>"
            "<ul><li><span class='date'>March 4, 2024</span> Other story</li></ul>"
            "<blockquote class='twitter-tweet'><a href='https://twitter.com/x/status/1'>May 5, 2024</a></blockquote>"
        ),
        "https://x.example/2023/05/01/story",
    )
    assert undated["published_at"] is None and undated["byline"] is None
    dated = metadata(
        _page(
            '<meta property="article:published_time" content="2025-01-05T10:00:00Z">'
            '<meta property="article:modified_time" content="2025-02-01T10:00:00Z">'
            '<link rel="canonical" href="/a/b">',
            "<article><time datetime='2025-03-01T09:00:00Z'>1 March</time><h1>Head</h1></article>",
        ),
        "https://x.example/a/b?utm=1",
    )
    assert dated["published_at"] == "2025-01-05T10:00:00+00:00"  # published, not modified
    assert dated["canonical"] == "https://x.example/a/b" and dated["title"] == "Head"
    in_article = metadata(
        _page(body="<article><time datetime='2025-03-01T09:00:00Z'>1 March 2025</time></article>"), ""
    )
    assert in_article["published_at"] == "2025-03-01T09:00:00+00:00"


@pytest.mark.parametrize(
    "hostile",
    [
        '<script type="application/ld+json">' + "[" * 50_000 + "]" * 50_000 + "</script>",
        '<script type="application/ld+json">{"author": {"name": 12}, "datePublished": 5, "headline": null}</script>',
        '<script type="application/ld+json">{"@graph": "x", "author": [1, [2], {"name": ["a"]}]}</script>',
        '<meta property="og:title" content="' + "T" * 1_000_000 + '">',
        '<meta property="article:published_time" content="99999-99-99T99:99:99">',
        '<meta name="author" content="\ud800 lone surrogate">',
        '<meta property="article:published_time" content="' + "2024-01-01" * 10_000 + '">',
    ],
)
def test_metadata_turns_junk_into_nothing(hostile: str) -> None:
    import lxml.html

    try:
        doc = lxml.html.document_fromstring(f"<html><head>{hostile}</head><body><p>x</p></body></html>")
    except ValueError:
        return  # lxml refuses the markup before we see it (extract_html then treats the body as text)
    meta = metadata(doc, "https://x.example/")
    for value in meta.values():
        assert value is None or (isinstance(value, str) and len(value) <= 2000)


@pytest.mark.parametrize(
    "body",
    [
        "<html><body><p>NUL \x00 byte</p></body></html>",
        "<html><body>" + "<div>" * 20_000 + "deep" + "</div>" * 20_000 + "</body></html>",
        "<html><body><p>" + "word " * 200_000 + "</p></body></html>",
        "<html><body><p>lone \ud800 surrogate and \udfff another</p></body></html>",
        "",
        "<<<>>>",
    ],
)
def test_extract_html_never_raises_on_hostile_pages(body: str) -> None:
    out = extract_html(body, "https://x.example/")
    assert isinstance(out.markdown, str)
