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
from urllib.parse import urljoin

import lxml.html  # type: ignore[import-untyped]
from lxml import etree  # type: ignore[import-untyped]

from agent_tools.web.text import tidy_markdown, words

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


_META_CHARS = 2000  # a title or byline longer than this is junk, and it would ride in every cached page


def _clip(value: Any) -> str | None:
    text = " ".join(str(value).split())[:_META_CHARS] if value else ""
    return text or None


def iso_date(value: str | None) -> str | None:
    """htmldate's answer in ISO 8601: ``+0100`` becomes ``+01:00``, and a date that came without a time
    (htmldate pads it with midnight) stays a plain date, so no time of day is ever made up."""
    m = re.match(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(?:([+-]\d{2}):?(\d{2}))?$", value or "")
    if not m:
        return None
    day, clock, tz_h, tz_m = m.groups()
    if tz_h is None:
        return day if clock == "00:00:00" else f"{day}T{clock}"
    return f"{day}T{clock}{tz_h}:{tz_m}"


def metadata(doc: Any, base_url: str) -> dict[str, str | None]:
    """Title, byline, description, canonical, lang and published date from the page's explicit markup.

    trafilatura reads the meta tags (Open Graph, Twitter, Dublin Core, ...) and JSON-LD, htmldate the
    publication date (header markup and structural elements only: ``extensive_search`` off, and no URL, so
    a date is never guessed from free text or from the address). trafilatura's ``extract_metadata`` is not
    called whole: its author search over the body (a copy of the whole tree), categories, tags and licence
    cost more than the extraction itself and feed no field of ours.
    """
    # Imported on first use, like trafilatura in extract_html.
    from htmldate import find_date
    from trafilatura.metadata import examine_meta, extract_meta_json, extract_title, extract_url

    # Each step is a library's parser over third-party markup: one that breaks on a page leaves its fields
    # empty instead of failing the fetch (metadata is optional, the article is not).
    try:
        found = examine_meta(doc)
    except Exception:
        from trafilatura.settings import Document

        found = Document()
    if found.author and " " not in found.author:
        found.author = None  # as extract_metadata does: a one-word "author" is a login name or "admin"
    try:
        found = extract_meta_json(doc, found)
    except Exception:
        pass
    title = found.title
    if not title:
        try:
            title = extract_title(doc)
        except Exception:
            title = None
    try:
        canonical = extract_url(doc)
    except Exception:
        canonical = None
    if not canonical:
        href = doc.xpath('//link[@rel="canonical"]/@href')
        canonical = _absolute(base_url, str(href[0])) if href else None
    try:
        date = find_date(doc, extensive_search=False, original_date=True, outputformat="%Y-%m-%dT%H:%M:%S%z")
    except Exception:
        date = None
    lang = str(doc.get("lang") or "").strip().split("-")[0].lower()
    return {
        "title": _clip(title),
        "byline": _clip(found.author),
        "description": _clip(found.description),
        "canonical": _clip(canonical),
        "lang": lang[:8] or None,
        "published_at": iso_date(date),
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
# Comments and processing instructions are dropped while parsing: React renders "<!-- -->" between text
# runs, and a comment node left in the tree cuts the sentence around it in trafilatura's text handling
# (given a string, trafilatura parses with the same two options). Doing it in the parser costs nothing.
_PARSER = lxml.html.HTMLParser(remove_comments=True, remove_pis=True, collect_ids=False)


# Noise with unambiguous markup: edit links, citation markers, tables of contents, navigation boxes,
# category bars, screen-reader-only and hidden elements, navigation landmarks, scripts. Checked in one walk
# over the tree in Python: the same rules as one XPath (class tokens through concat/normalize-space) cost
# ten times as much.
_NOISE_CLASSES = frozenset({"mw-editsection", "toc", "navbox", "catlinks", "noprint", "sr-only", "visually-hidden"})
_NOISE_IDS = frozenset({"toc", "catlinks"})
_NOISE_ROLES = frozenset({"navigation", "banner", "contentinfo", "search"})
_NOISE_TAGS = frozenset({"script", "style", "noscript", "template"})
_INLINE_TAGS = frozenset({"span", "a", "time", "small", "label", "em", "strong", "b", "i"})


def _is_noise(el: Any) -> bool:
    if el.tag in _NOISE_TAGS:
        return True
    attrib = el.attrib
    if not attrib:
        return False
    classes = attrib.get("class")
    if classes and (
        not _NOISE_CLASSES.isdisjoint(classes.split()) or (el.tag == "sup" and "reference" in classes.split())
    ):
        return True
    if attrib.get("id") in _NOISE_IDS or attrib.get("role") in _NOISE_ROLES:
        return True
    if attrib.get("aria-hidden") == "true" or "hidden" in attrib:
        return True
    style = attrib.get("style")
    return bool(style) and "display:none" in style.replace(" ", "")


_HEADING = "self::h1 or self::h2 or self::h3 or self::h4 or self::h5 or self::h6"
# A list whose every item holds a linked headline is a grid of teaser cards ("Our latest stories"), never
# the article; trafilatura keeps some of them as empty bullets followed by loose "####" sublines.
_TEASER_LISTS = f"//ul[li][not(li[not(.//*[{_HEADING}][.//a])])] | //ol[li][not(li[not(.//*[{_HEADING}][.//a])])]"
_BLOCK_TAGS = ("div", "p", "table", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "form", "blockquote", "pre")
_HAS_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _absolute(base: str, href: str) -> str:
    try:
        return urljoin(base, href.strip())
    except ValueError:
        return href


def _absolute_links(doc: Any, url: str) -> None:
    """Links made absolute (the Markdown must work outside the page). Only ``<a href>``: the extractor keeps
    no other URL, and rewriting every attribute of every element (lxml's ``make_links_absolute``) cost
    more than a third of the whole extraction."""
    base = doc.xpath("//base/@href")
    base_url = _absolute(url, str(base[0])) if base else url
    for a in doc.iter("a"):
        href = a.get("href")
        if href and not href.startswith("#") and not _HAS_SCHEME.match(href):
            a.set("href", _absolute(base_url, href))


def _is_layout_table(table: Any) -> bool:
    """Tables used for page layout (old sites, e-mail-like pages) are not data: no header cells, and a cell
    that holds blocks, nested tables or a long run of prose."""
    if table.xpath(".//th") or table.xpath("ancestor::table"):
        return False
    for cell in table.xpath("./tr/td | ./tbody/tr/td | ./thead/tr/td"):
        if next(cell.iterdescendants(*_BLOCK_TAGS), None) is not None or len(cell.text_content().split()) > 60:
            return True
    return False


def _prepare(doc: Any, url: str) -> None:
    """Everything done to the tree before trafilatura sees it, each step one pass over the tree."""
    in_code = set(doc.xpath("//pre//* | //code//*"))
    noise: list[Any] = []
    for el in doc.iter():
        if not isinstance(el.tag, str):
            continue  # entities
        if _is_noise(el):
            noise.append(el)
        elif el.tag in _INLINE_TAGS and not el.tail and el not in in_code:
            # <a>kjell</a><span>Moderator</span> renders as two words in a browser (CSS spacing) but as
            # "kjellModerator" in text; a space between adjacent inline elements keeps the words apart.
            # Not inside code, where highlighting makes one span per token.
            nxt = el.getnext()
            if nxt is not None and nxt.tag in _INLINE_TAGS:
                el.tail = " "
    for el in noise:
        if el.getparent() is not None:
            el.drop_tree()  # keeps the tail text, which belongs to the parent
    for el in doc.xpath(_TEASER_LISTS):
        if el.getparent() is not None:
            el.drop_tree()
    _absolute_links(doc, url)
    for table in doc.iter("table"):
        if _is_layout_table(table):
            for el in table.iter("table", "tbody", "thead", "tfoot", "tr", "td"):
                el.tag = "div"
                for attr in ("width", "valign", "align", "colspan", "rowspan"):
                    el.attrib.pop(attr, None)


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


_OFF_CONTENT_TAGS = frozenset({"nav", "aside", "footer", "header", "form", "menu", "dialog"})
_OFF_CONTENT_HINT = re.compile(
    r"(^|[\s_-])(nav|navbar|menu|sidebar|rail|footer|masthead|related|recommend\w*|promo\w*|newsletter|"
    r"subscribe|signup|social|share|trending|popular|most-read|more-stories|latest|teaser|widget|author|"
    r"byline|bio|comments?|video|playlist|outbrain|taboola|ad|ads|advert\w*)([\s_-]|$)",
    re.I,
)
_RESTORABLE = "//h2 | //h3 | //h4"
_TEXT_BLOCKS = "//h2 | //h3 | //h4 | //p | //li | //pre | //blockquote | //dd | //figcaption | //td | //th"


def _off_content(heading: Any) -> bool:
    """Inside navigation, an aside, a header or footer, or a block whose class or id says it is related
    content, a newsletter box, an author box, comments or a video rail."""
    for el in (heading, *heading.iterancestors()):
        if el.tag in ("body", "html"):
            return False
        if el.tag in _OFF_CONTENT_TAGS:
            return True
        if _OFF_CONTENT_HINT.search(f"{el.get('class', '')} {el.get('id', '')}"):
            return True
    return False


def _is_heading_block(block: str) -> bool:
    return bool(re.match(r"^#{1,6}\s", block)) and "\n" not in block


def _restore_headings(md: str, doc: Any) -> str:
    """Put back the section headings the extractor dropped (its readability and jusText fallbacks keep
    paragraphs only), and only those that belong to the article: a heading comes back when the next text
    block after it on the page is a block the extractor kept, in document order, and the heading is not a
    linked headline nor inside navigation, an aside or a related-content, newsletter, author or video
    block."""
    from agent_tools.web.text import markdown_to_text

    blocks = md.split("\n\n")
    present = {_norm(markdown_to_text(b)) for b in blocks if _is_heading_block(b)}
    candidates = [h for h in doc.xpath(_RESTORABLE) if _norm(h.text_content()) not in present]
    if not candidates:
        return md  # the usual case: nothing was dropped, and the page is not walked again
    kept: dict[str, int] = {}
    for i, block in enumerate(blocks):
        if not _is_heading_block(block):
            text = _norm(markdown_to_text(block))
            if len(text) >= 20:
                kept.setdefault(text[:40], i)
    inserts: dict[int, str] = {}
    pending: Any = None
    last = -1
    for el in doc.xpath(_TEXT_BLOCKS):
        if el.tag in ("h2", "h3", "h4"):
            pending = el
            continue
        text = _norm(el.text_content())
        if not text:
            continue
        heading, pending = pending, None
        j = kept.get(text[:40]) if len(text) >= 20 else None
        if j is None or j <= last:
            continue
        last = j
        if heading is None or j in inserts or (j > 0 and _is_heading_block(blocks[j - 1])):
            continue
        title = " ".join(heading.text_content().split())
        linked = " ".join(" ".join(a.text_content() for a in heading.iter("a")).split())
        if not title or len(title) > 150 or _norm(title) in present or linked == title or _off_content(heading):
            continue
        inserts[j] = "#" * int(heading.tag[1]) + " " + title
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
        doc = lxml.html.document_fromstring(html, parser=_PARSER)
    except (etree.ParserError, ValueError):
        return Extracted(markdown=tidy_markdown(html), extractor="plain")
    meta = metadata(doc, url)
    _prepare(doc, url)
    originals = _original_code_blocks(doc)
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
    return Extracted(markdown=_restore_headings(primary_md, doc), extractor="trafilatura", **meta)


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
