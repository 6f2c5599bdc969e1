"""Main-content extraction: HTML to the article as Markdown, plus the page's metadata.

1. Prepare the tree: links made absolute (the Markdown must work outside the page); unambiguous noise
   removed (edit links, citation markers, tables of contents, navboxes, hidden elements, navigation roles);
   layout tables turned into blocks; adjacent inline elements spaced (except inside code).
2. Primary extractor: trafilatura (the top class on article-extraction benchmarks, with its own
   readability/jusText fallbacks), asked for Markdown with tables, links and formatting.
3. Repair what it loses: blank lines inside code (original ``<pre>`` text restored), the code language
   (``language-x``, ``highlight-x`` classes become the fence's info string), section headings it dropped.
4. Fallback: when trafilatura keeps nothing, or under a quarter of a long main text, the readability-style
   main container (boilerplate removed, ``<article>``/``<main>``/densest block) converted with markdownify.

Metadata (title, byline, description, canonical, lang, published date) come from explicit markup only
(meta tags, JSON-LD, ``<time datetime>``): a date is never guessed from text or the URL.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import lxml.html  # type: ignore[import-untyped]
from lxml import etree  # type: ignore[import-untyped]

from agent_tools.contracts.web.text import tidy_markdown, words

_BOILERPLATE_TAGS = (
    "script",
    "style",
    "noscript",
    "nav",
    "aside",
    "footer",
    "header",
    "form",
    "iframe",
    "svg",
    "button",
    "template",
    "dialog",
    "select",
    "input",
)
_BOILERPLATE_HINT = re.compile(
    r"(^|[\s_-])(nav|navbar|menu|sidebar|footer|header|masthead|breadcrumb|cookie|consent|banner|advert|ads?|"
    r"promo|share|social|related|recommend|newsletter|subscribe|signup|comment-form|skip|toolbar|pagination|"
    r"popup|modal)([\s_-]|$)",
    re.I,
)
_DATE_META = (
    "article:published_time",
    "og:published_time",
    "datePublished",
    "date",
    "dc.date",
    "dc.date.issued",
    "pubdate",
    "publishdate",
    "publish-date",
    "sailthru.date",
    "parsely-pub-date",
)


@dataclass
class Extracted:
    markdown: str
    title: str | None = None
    byline: str | None = None
    description: str | None = None
    canonical: str | None = None
    lang: str | None = None
    published_at: str | None = None
    extractor: str = "trafilatura"


def _meta(doc: Any, *names: str) -> str | None:
    for name in names:
        for attr in ("property", "name", "itemprop"):
            found = doc.xpath(f'//meta[@{attr}="{name}"]/@content')
            if found and str(found[0]).strip():
                return str(found[0]).strip()
    return None


def _json_ld(doc: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for script in doc.xpath('//script[@type="application/ld+json"]/text()'):
        try:
            data = json.loads(script)
        except ValueError:
            continue
        stack = data if isinstance(data, list) else [data]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                items.append(node)
                graph = node.get("@graph")
                if isinstance(graph, list):
                    stack.extend(graph)
    return items


def _iso_date(value: str | None) -> str | None:
    """Keep a date only when it is an explicit ISO 8601 date or date-time."""
    if not value:
        return None
    value = value.strip()
    m = re.match(r"^(\d{4}-\d{2}-\d{2})([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?", value)
    if not m:
        return None
    return m.group(0).replace(" ", "T") if m.group(2) else m.group(1)


def metadata(doc: Any, base_url: str) -> dict[str, str | None]:
    ld = _json_ld(doc)
    title = _meta(doc, "og:title", "twitter:title")
    if not title:
        t = doc.xpath("//title/text()")
        title = str(t[0]).strip() if t else None
    if not title:
        h1 = doc.xpath("//h1")
        title = h1[0].text_content().strip() if h1 else None
    byline = _meta(doc, "author", "article:author", "byl", "parsely-author", "dc.creator")
    if not byline:
        for node in ld:
            author = node.get("author")
            if isinstance(author, dict) and author.get("name"):
                byline = str(author["name"])
            elif isinstance(author, list) and author and isinstance(author[0], dict):
                byline = ", ".join(str(a.get("name")) for a in author if isinstance(a, dict) and a.get("name"))
            elif isinstance(author, str):
                byline = author
            if byline:
                break
    if not byline:
        rel = doc.xpath('//*[@rel="author"]')
        byline = rel[0].text_content().strip() or None if rel else None
    published = _iso_date(_meta(doc, *_DATE_META))
    if not published:
        for node in ld:
            published = _iso_date(str(node.get("datePublished") or "")) or published
            if published:
                break
    if not published:
        times = doc.xpath("//article//time/@datetime | //*[@itemprop='datePublished']/@datetime")
        published = _iso_date(str(times[0])) if times else None
    canonical = doc.xpath('//link[@rel="canonical"]/@href')
    lang = doc.xpath("/html/@lang") or doc.xpath("//html/@lang")
    return {
        "title": title,
        "byline": byline,
        "description": _meta(doc, "description", "og:description", "twitter:description"),
        "canonical": lxml.html.urljoin(base_url, str(canonical[0]).strip()) if canonical else None,
        "lang": str(lang[0]).strip().split("-")[0].lower() or None if lang else None,
        "published_at": published,
    }


_LANG_CLASS = re.compile(r"(?:^|\s)(?:language|lang)-([\w+#.-]+)")
_HIGHLIGHT_CLASS = re.compile(r"(?:^|\s)highlight-(?:source-)?([a-z][\w+#.-]*)")


def code_language(pre: Any) -> str | None:
    """The language a ``<pre>`` declares: ``language-x``/``lang-x`` on it or its ``<code>`` (Prism,
    highlight.js, Markdown renderers), or ``highlight-x``/``highlight-source-x`` on a wrapper (Sphinx,
    GitHub)."""
    nodes = [pre, *pre.findall("code")]
    for node in nodes:
        m = _LANG_CLASS.search(node.get("class", ""))
        if m:
            return m.group(1)
    for wrapper in pre.iterancestors("div"):
        m = _HIGHLIGHT_CLASS.search(wrapper.get("class", ""))
        if m and m.group(1) not in ("default",):
            return m.group(1)
    return None


def _mark_code_languages(doc: Any) -> None:
    """Trafilatura drops the language classes; a marker line inside the block survives extraction and is
    turned back into the fence's info string afterwards."""
    for pre in doc.iter("pre"):
        lang = code_language(pre)
        if not lang:
            continue
        code = pre.find("code")
        target = code if code is not None and not (pre.text or "").strip() else pre
        target.text = f"⟦lang:{lang}⟧\n{target.text or ''}"


def _restore_code_languages(md: str) -> str:
    md = re.sub(r"```[^\n]*\n⟦lang:([\w+#.-]+)⟧\n", r"```\1\n", md)
    md = re.sub(r"`?⟦lang:([\w+#.-]+)⟧\n?", "", md)
    return md


_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>", re.I)
_INLINE_TAGS = frozenset({"span", "a", "time", "small", "label", "em", "strong", "b", "i"})


def _space_inline_neighbours(doc: Any) -> None:
    """``<a>kjell</a><span>Moderator</span>`` renders as two words in a browser (CSS spacing) but as
    "kjellModerator" in text; a space between adjacent inline elements keeps the words apart."""
    for el in doc.iter(*_INLINE_TAGS):
        if el.xpath("ancestor::pre or ancestor::code"):
            continue  # highlighted code is one span per token: spacing would change the program
        nxt = el.getnext()
        if nxt is not None and isinstance(nxt.tag, str) and nxt.tag in _INLINE_TAGS and not (el.tail or "").strip():
            el.tail = " "


# Noise with unambiguous markup: edit links, citation markers, tables of contents, navigation boxes,
# category bars, screen-reader-only and hidden elements. Removed before any extractor sees the page.
_NOISE_XPATH = " | ".join(
    [
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' mw-editsection ')]",
        "//sup[contains(concat(' ', normalize-space(@class), ' '), ' reference ')]",
        "//*[@id='toc' or contains(concat(' ', normalize-space(@class), ' '), ' toc ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' navbox ')]",
        "//*[@id='catlinks' or contains(concat(' ', normalize-space(@class), ' '), ' catlinks ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' noprint ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' sr-only ')]",
        "//*[contains(concat(' ', normalize-space(@class), ' '), ' visually-hidden ')]",
        "//*[@aria-hidden='true']",
        "//*[@hidden]",
        "//*[contains(translate(@style, ' ', ''), 'display:none')]",
        "//*[@role='navigation' or @role='banner' or @role='contentinfo' or @role='search']",
        "//script | //style | //noscript | //template",
    ]
)
_BLOCK_TAGS = ("div", "p", "table", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "form", "blockquote", "pre")


def _preclean(doc: Any) -> None:
    for el in doc.xpath(_NOISE_XPATH):
        parent = el.getparent()
        if parent is not None and el.tag not in ("html", "body"):
            el.drop_tree()  # keeps the tail text, which belongs to the parent


def _is_layout_table(table: Any) -> bool:
    """Tables used for page layout (old sites, e-mail-like pages) are not data: no header cells, and a cell
    that holds blocks, nested tables or a long run of prose."""
    if table.xpath(".//th") or table.xpath("ancestor::table"):
        return False
    for cell in table.xpath("./tr/td | ./tbody/tr/td | ./thead/tr/td"):
        if next(cell.iterdescendants(*_BLOCK_TAGS), None) is not None or len(cell.text_content().split()) > 60:
            return True
    return False


def _unwrap_layout_tables(doc: Any) -> None:
    for table in doc.xpath("//table"):
        if _is_layout_table(table):
            for el in table.iter("table", "tbody", "thead", "tfoot", "tr", "td"):
                el.tag = "div"
                for attr in ("width", "valign", "align", "colspan", "rowspan"):
                    el.attrib.pop(attr, None)


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def _restore_headings(md: str, doc: Any) -> str:
    """Put back section headings the extractor dropped (its fallbacks keep paragraphs only) when the
    paragraph that follows a heading on the page was kept: structure for the reader, words for recall."""
    from agent_tools.contracts.web.text import markdown_to_text

    blocks = md.split("\n\n")
    plain = [_norm(markdown_to_text(b)) for b in blocks]
    present = _norm(markdown_to_text(md))
    inserts: dict[int, str] = {}
    for heading in doc.xpath("//h2 | //h3 | //h4"):
        title = " ".join(heading.text_content().split())
        if not title or len(title) > 150 or _norm(title) in present:
            continue
        following = heading.xpath("following::p[string-length(normalize-space()) > 30][1]")
        if not following:
            continue
        prefix = _norm(following[0].text_content())[:50]
        for i, text in enumerate(plain):
            if text.startswith(prefix) and i not in inserts:
                inserts[i] = "#" * int(heading.tag[1]) + " " + title
                break
    if not inserts:
        return md
    out: list[str] = []
    for i, block in enumerate(blocks):
        if i in inserts:
            out.append(inserts[i])
        out.append(block)
    return "\n\n".join(out)


def _original_code_blocks(doc: Any) -> dict[str, str]:
    """Original text of every <pre>, keyed by its non-blank lines (trafilatura drops blank lines in code)."""
    blocks: dict[str, str] = {}
    for pre in doc.iter("pre"):
        text = pre.text_content().strip("\n")
        key = "\n".join(line.strip() for line in text.split("\n") if line.strip())
        blocks[key] = text
    return blocks


def _restore_code_blocks(md: str, originals: dict[str, str]) -> str:
    def replace(m: re.Match[str]) -> str:
        body = m.group(2)
        key = "\n".join(line.strip() for line in body.split("\n") if line.strip())
        original = originals.get(key)
        return f"{m.group(1)}\n{original}\n```" if original is not None else m.group(0)

    return re.sub(r"(```[^\n]*)\n(.*?)\n```", replace, md, flags=re.S)


def _strip_boilerplate(root: Any) -> None:
    for el in list(root.iter()):
        if not isinstance(el.tag, str):
            continue
        parent = el.getparent()
        if parent is None:
            continue
        hint = f"{el.get('class', '')} {el.get('id', '')} {el.get('role', '')}"
        if (
            el.tag in _BOILERPLATE_TAGS
            or (el.tag not in ("body", "main", "article") and _BOILERPLATE_HINT.search(hint))
            or el.get("aria-hidden") == "true"
            or el.get("hidden") is not None
        ):
            parent.remove(el)


def _main_container(root: Any) -> Any:
    """The readability-style choice: <article>/<main>/role=main, else the element with most paragraph text."""
    for xp in ("//article", "//main", "//*[@role='main']", "//*[@itemprop='articleBody']"):
        found = root.xpath(xp)
        if found:
            return max(found, key=lambda e: len(e.text_content()))
    best, best_score = root, 0.0
    for el in root.iter("div", "section", "td"):
        text = " ".join(p.text_content() for p in el.findall(".//p"))
        link_text = sum(len(a.text_content()) for a in el.findall(".//a"))
        score = len(text) - 2 * link_text
        if score > best_score:
            best, best_score = el, score
    return best


def fallback_container(root: Any) -> Any:
    """The readability-style main container of a copy of the page, boilerplate removed."""
    tree = lxml.html.fromstring(lxml.html.tostring(root))
    _strip_boilerplate(tree)
    body = tree.find("body") if tree.tag == "html" else tree
    return _main_container(body if body is not None else tree)


def _markdownify(html: str, **options: Any) -> str:
    # Imported on first use, like trafilatura below: markdownify brings BeautifulSoup (9 MB of a worker's
    # memory) that a worker which never fetches a page should not carry.
    from markdownify import markdownify

    return tidy_markdown(markdownify(html, heading_style="ATX", bullets="-", **options))


def container_markdown(container: Any) -> str:
    return _markdownify(lxml.html.tostring(container, encoding="unicode"), code_language_callback=_code_lang)


def fallback_markdown(root: Any) -> str:
    """Boilerplate removed, main container converted whole with markdownify."""
    return container_markdown(fallback_container(root))


def whole_page_markdown(html: str) -> str:
    """The baseline the bench compares against: the whole page through markdownify, scripts removed."""
    return _markdownify(html, strip=["script", "style"])


def _code_lang(el: Any) -> str | None:
    code = el.find("code")

    def classes_of(node: Any) -> str:
        value = node.get("class") if node is not None else None
        return " ".join(value) if isinstance(value, list) else str(value or "")

    classes = f"{classes_of(el)} {classes_of(code)}"
    m = re.search(r"(?:language|lang)-([\w+#.-]+)", classes)
    return m.group(1) if m else None


def extract_html(html: str, url: str) -> Extracted:
    """The article of an HTML page as Markdown, with its metadata."""
    # lxml refuses str input that declares an encoding (XHTML's <?xml ... encoding="utf-8"?>): the text is
    # already decoded, so the declaration goes.
    html = _XML_DECLARATION.sub("", html, count=1)
    try:
        doc = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return Extracted(markdown=tidy_markdown(html), extractor="plain")
    doc.make_links_absolute(url, resolve_base_href=True, handle_failures="ignore")
    meta = metadata(doc, url)
    _preclean(doc)
    _unwrap_layout_tables(doc)
    originals = _original_code_blocks(doc)
    _space_inline_neighbours(doc)
    _mark_code_languages(doc)
    # Imported on first use: trafilatura and its date/language helpers weigh tens of MB that a worker
    # which never fetches a page should not carry.
    import trafilatura

    primary = trafilatura.extract(
        doc,
        url=url,
        output_format="markdown",
        include_tables=True,
        include_links=True,
        include_formatting=True,
        include_images=False,
        include_comments=False,
        deduplicate=False,
        fast=False,
    )
    primary_md = tidy_markdown(_restore_code_blocks(_restore_code_languages(primary), originals)) if primary else ""
    n_primary = len(words(primary_md))
    # Trafilatura (with its own readability/jusText fallbacks) is the better extractor on real articles; the
    # container conversion only wins when trafilatura kept nothing or a small fragment of a long main text.
    # The whole page's word count bounds the container's, so the container is only built when it could win
    # (trafilatura leaves the tree it is given untouched).
    if n_primary == 0 or n_primary < 0.25 * len(doc.text_content().split()):
        container = fallback_container(doc)
        n_fallback = len(words(container.text_content()))
        if n_primary == 0 or (n_fallback > 100 and n_primary < 0.25 * n_fallback):
            return Extracted(markdown=container_markdown(container), extractor="fallback", **meta)
    md, extractor = _restore_headings(primary_md, doc), "trafilatura"
    return Extracted(markdown=md, extractor=extractor, **meta)


def extract_document(body: str, content_type: str, url: str) -> Extracted:
    """Any accepted type to Markdown: HTML/XHTML extracted, JSON pretty-printed, XML and text kept."""
    if content_type in ("text/html", "application/xhtml+xml") or (
        not content_type and body.lstrip()[:200].lower().startswith(("<!doctype html", "<html"))
    ):
        return extract_html(body, url)
    if content_type == "application/json" or content_type.endswith("+json"):
        try:
            pretty = json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        except ValueError:
            pretty = body
        return Extracted(markdown=f"```json\n{pretty}\n```\n", extractor="json")
    if content_type in ("application/xml", "text/xml") or content_type.endswith("+xml"):
        return Extracted(markdown=f"```xml\n{body.strip()}\n```\n", extractor="plain")
    return Extracted(markdown=tidy_markdown(body), extractor="plain")
