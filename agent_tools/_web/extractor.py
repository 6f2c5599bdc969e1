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

import copy
import functools
import json
import re
from typing import Any
from urllib.parse import urljoin

import lxml.html  # type: ignore[import-untyped]
from lxml import etree  # type: ignore[import-untyped]

from agent_tools.contracts._web.models import Extracted
from agent_tools.contracts._web.text import tidy_markdown, words

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


_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"
# Where a <time> or datePublished element is some other item's date: teaser cards, "most read" lists,
# embedded posts, comments, sidebars.
_OTHER_ITEMS_TAGS = frozenset({"nav", "aside", "footer", "blockquote", "li", "menu", "form"})
_OTHER_ITEMS_HINT = re.compile(
    r"(^|[\s_-])(related|recommend\w*|most-read|popular|trending|teaser|card|comments?|widget|sidebar|"
    r"more-stories|latest|tweet|twitter-tweet|embed\w*|promo\w*)([\s_-]|$)",
    re.I,
)


def _about_other_item(el: Any) -> bool:
    for anc in el.iterancestors():
        if anc.tag in _OTHER_ITEMS_TAGS or _OTHER_ITEMS_HINT.search(f"{anc.get('class', '')} {anc.get('id', '')}"):
            return True
    return False


_DATE_NAME = re.compile(r"date|time|publish|created|issued|modified|updated", re.I)


def _date_markup(doc: Any) -> Any | None:
    """A small tree holding only the page's explicit date markup, for htmldate: every ``<meta>``, the JSON-LD
    blocks, and the first ``<time datetime>`` / ``itemprop=datePublished`` element of the page's own
    (not of a teaser, an embedded post or a comment), emptied of its text; None when there is none.

    Given the whole page, htmldate also matches visible text ("Posted on 18 September 2025" before the
    element's exact ``datetime``) and the dates of teaser cards on a page that has no date of its own;
    the fixtures showed both. This way a date is never taken from text, and what htmldate adds (which of
    many meta names, published over modified, validation) is kept.
    """
    make = doc.makeelement  # an lxml.html element: htmldate accepts no plain etree element
    root, head, body = make("html"), make("head"), make("body")
    root.extend((head, body))
    for meta in doc.iter("meta"):
        names = " ".join(meta.get(a) or "" for a in ("name", "property", "itemprop", "http-equiv"))
        if _DATE_NAME.search(names):
            head.append(copy.copy(meta))
    for script in doc.xpath("//script[@type='application/ld+json']"):
        if "date" in (script.text or "").lower():
            head.append(copy.copy(script))
    for el in doc.xpath("//time[@datetime] | //*[@itemprop='datePublished' or @itemprop='dateCreated']"):
        if not _about_other_item(el):
            body.append(make(el.tag, {k: v for k, v in el.attrib.items() if k in ("datetime", "itemprop", "content")}))
            break
    return root if len(head) or len(body) else None


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
        markup = _date_markup(doc)
        # url="" keeps htmldate from reading a date out of the canonical link's path.
        date = (
            find_date(markup, extensive_search=False, original_date=True, outputformat=_DATE_FORMAT, url="")
            if markup is not None
            else None
        )
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
    highlight.js, Markdown renderers), or on the wrapper around it, as ``highlight-x``/``highlight-source-x``
    (Sphinx, GitHub) or ``language-x`` (MkDocs). Only the two nearest wrappers: a ``language-en`` far up
    the page is the site's language, not the code's."""
    for node in (pre, *pre.findall("code")):
        m = _LANG_CLASS.search(node.get("class", ""))
        if m:
            return m.group(1)
    for depth, wrapper in enumerate(pre.iterancestors("div")):
        if depth >= 2:
            break
        classes = wrapper.get("class", "")
        m = _HIGHLIGHT_CLASS.search(classes) or _LANG_CLASS.search(classes)
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
_NOISE_CLASSES = frozenset(
    {
        "mw-editsection",
        "toc",
        "navbox",
        "catlinks",
        "noprint",
        "sr-only",
        "visually-hidden",
        "headerlink",  # Sphinx and MkDocs permalink pilcrows
        "md-content__button",  # MkDocs "Edit this page"
        "edit-this-page",
        "edit-link",
    }
)
_NOISE_IDS = frozenset({"toc", "catlinks"})
_NOISE_ROLES = frozenset({"navigation", "banner", "contentinfo", "search"})
_NOISE_TAGS = frozenset({"script", "style", "noscript", "template"})
_INLINE_TAGS = frozenset({"span", "a", "time", "small", "label", "em", "strong", "b", "i"})
# The label of an ad slot, alone in its element.
_AD_LABELS = frozenset(
    {"advertisement", "advert", "ad", "sponsored", "anzeige", "publicité", "publicidad", "pubblicità"}
)
# "Read more: <a>Other story</a>" between paragraphs: a link to another article, not part of this one.
_READ_MORE = re.compile(r"^(read more|read also|also read|related|see also|more|watch|listen|recommended)\W*$", re.I)


def _is_noise(el: Any) -> bool:
    tag = el.tag
    if tag in _NOISE_TAGS:
        return bool(el.get("type") != "application/ld+json")  # JSON-LD is read for the metadata afterwards
    children = len(el)
    if children == 0:
        text = el.text
        if text and len(text) < 20 and text.strip().lower() in _AD_LABELS:
            return True
    elif tag == "p" and children <= 2 and _ends_with_link(el) and _is_read_more(el):
        return True  # the cheap test first: the link ends the paragraph
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
    return bool(style) and "display:none" in str(style).replace(" ", "")


_HEADING = "self::h1 or self::h2 or self::h3 or self::h4 or self::h5 or self::h6"
# A list whose every item holds a linked headline is a grid of teaser cards ("Our latest stories"), never
# the article; trafilatura keeps some of them as empty bullets followed by loose "####" sublines.
_TEASER_LISTS = f"//ul[li][not(li[not(.//*[{_HEADING}][.//a])])] | //ol[li][not(li[not(.//*[{_HEADING}][.//a])])]"
_BLOCK_TAGS = ("div", "p", "table", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "form", "blockquote", "pre")
_HAS_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_UNUSUAL = re.compile(r"[\\\s]")  # backslashes and whitespace: urljoin's normalisation decides


def _absolute(base: str, href: str) -> str:
    try:
        return urljoin(base, href.strip())
    except ValueError:
        return href


def _absolute_links(doc: Any, url: str) -> None:
    """Links made absolute (the Markdown must work outside the page). Only ``<a href>``: the extractor keeps
    no other URL, and rewriting every attribute of every element (lxml's ``make_links_absolute``) cost
    more than a third of the whole extraction. The usual forms (``/path``, ``//host/path``, ``#part``) are
    joined by hand, since ``urljoin`` costs more than the rest of this walk."""
    base = doc.xpath("//base/@href")
    base_url = _absolute(url, str(base[0])) if base else url
    scheme, _, rest = base_url.partition("://")
    origin = f"{scheme}://{rest.split('/', 1)[0].split('?', 1)[0].split('#', 1)[0]}" if rest else ""
    page = base_url.split("#", 1)[0]
    done: dict[str, str] = {}
    for a in doc.iter("a"):
        href = a.get("href")
        if not href or _HAS_SCHEME.match(href):
            continue
        absolute = done.get(href)
        if absolute is None:
            if href.startswith("//") and scheme:
                absolute = f"{scheme}:{href}"
            elif href.startswith("/") and origin and "/." not in href and not _UNUSUAL.search(href):
                absolute = origin + href
            elif href.startswith("#") and page:
                absolute = page + href
            else:
                absolute = _absolute(base_url, href)  # ../x, x.html, dot segments: the RFC's rules
            done[href] = absolute
        a.set("href", absolute)


def _is_layout_table(table: Any) -> bool:
    """Tables used for page layout (old sites, e-mail-like pages) are not data: no header cells, and a cell
    that holds blocks, nested tables or a long run of prose."""
    if table.xpath(".//th") or table.xpath("ancestor::table"):
        return False
    for cell in table.xpath("./tr/td | ./tbody/tr/td | ./thead/tr/td"):
        if next(cell.iterdescendants(*_BLOCK_TAGS), None) is not None or len(cell.text_content().split()) > 60:
            return True
    return False


def _ends_with_link(p: Any) -> bool:
    """``<p>Read more: <a>..</a></p>`` or ``<p><strong>READ MORE: <a>..</a></strong></p>``."""
    last = p[-1]
    if last.tag == "a":
        return not (last.tail or "").strip()
    return len(last) > 0 and last[-1].tag == "a"


def _is_read_more(p: Any) -> bool:
    links = p.findall(".//a")
    if len(links) != 1:
        return False
    label = (p.text_content() or "").replace(links[0].text_content() or "", "", 1)
    return len(label) < 30 and bool(_READ_MORE.match(label.strip()))


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


def _off_content(heading: Any, seen: dict[Any, bool] | None = None) -> bool:
    """Inside navigation, an aside, a header or footer, a link, or a block whose class or id says it is
    related content, a newsletter box, an author box, comments or a video rail. ``seen`` remembers the
    answer for ancestors already looked at (the headings of one page share most of them)."""
    seen = {} if seen is None else seen
    path: list[Any] = []
    verdict = False
    for el in heading.iterancestors():
        if el in seen:
            verdict = seen[el]
            break
        path.append(el)
        if el.tag in ("body", "html"):
            break
        if (
            el.tag in _OFF_CONTENT_TAGS
            or el.tag == "a"  # an <a> around a heading makes it a teaser's headline
            or _OFF_CONTENT_HINT.search(f"{el.get('class', '')} {el.get('id', '')}")
        ):
            verdict = True
            break
    for el in path:
        seen[el] = verdict
    return verdict or bool(_OFF_CONTENT_HINT.search(f"{heading.get('class', '')} {heading.get('id', '')}"))


def _linked(heading: Any) -> bool:
    """A headline that is all link: a teaser pointing at another page."""
    linked = "".join(a.text_content() for a in heading.iter("a"))
    return bool(linked.strip()) and linked.split() == heading.text_content().split()


def _is_heading_block(block: str) -> bool:
    return bool(re.match(r"^#{1,6}\s", block)) and "\n" not in block


def _restore_headings(md: str, doc: Any) -> str:
    """Put back the section headings the extractor dropped (its readability and jusText fallbacks keep
    paragraphs only), and only those that belong to the article: a heading comes back when the next text
    block after it on the page is a block the extractor kept, in document order, inside the heading's own
    container, and the heading is not a linked headline nor inside navigation, an aside or a
    related-content, newsletter, author or video block."""
    from agent_tools.contracts._web.text import markdown_to_text

    blocks = md.split("\n\n")
    present = {_norm(markdown_to_text(b)) for b in blocks if _is_heading_block(b)}
    candidates = [
        h
        for h in doc.xpath(_RESTORABLE)
        if (t := _norm(h.text_content())) and len(t) <= 150 and t not in present and not _linked(h)
    ]
    # The usual case: every heading is in the output, or is a teaser's or a sidebar's, and the page is not
    # walked again.
    seen: dict[Any, bool] = {}
    if all(_off_content(h, seen) for h in candidates):
        return md
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
        # The heading and the block must share a container: the heading's parent holds the block. A card or
        # teaser box between two paragraphs holds only its own headline.
        parent = heading.getparent()
        if parent is None or not any(anc is parent for anc in el.iterancestors()):
            continue
        title = " ".join(heading.text_content().split())
        if not title or len(title) > 150 or _norm(title) in present or _linked(heading) or _off_content(heading, seen):
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
    # Imported on first use, like trafilatura below: markdownify brings BeautifulSoup, which a worker that
    # never fetches a page should not carry.
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


@functools.cache
def _trafilatura_options() -> Any:
    """One trafilatura configuration for every page (it is read-only there, and building it parses
    trafilatura's settings file each time). No ``url``: the links are absolute already, and with a URL
    trafilatura resolves every link again."""
    # Imported on first use: trafilatura and its date/language helpers weigh tens of MB that a worker
    # which never fetches a page should not carry.
    from trafilatura.settings import Extractor

    return Extractor(
        output_format="markdown",
        tables=True,
        links=True,
        formatting=True,
        images=False,
        comments=False,
        dedup=False,
        fast=False,
    )


def extract_html(html: str, url: str) -> Extracted:
    """The article of an HTML page as Markdown, with its metadata."""
    # lxml refuses str input that declares an encoding (XHTML's <?xml ... encoding="utf-8"?>): the text is
    # already decoded, so the declaration goes.
    html = _XML_DECLARATION.sub("", html, count=1)
    try:
        doc = lxml.html.document_fromstring(html, parser=_PARSER)
    except (etree.ParserError, ValueError):
        return Extracted(markdown=tidy_markdown(html), extractor="plain")
    _prepare(doc, url)
    meta = metadata(doc, url)
    originals = _original_code_blocks(doc)
    _mark_code_languages(doc)
    import trafilatura

    primary = trafilatura.extract(doc, options=_trafilatura_options())
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
    md = _drop_title_heading(_restore_headings(primary_md, doc), meta["title"])
    return Extracted(markdown=md, extractor="trafilatura", **meta)


def _drop_title_heading(md: str, title: str | None) -> str:
    """The page's headline as the first line is the ``title`` field again: every face shows that field
    above the content, and article-extraction benchmarks leave the headline out of the body."""
    first, _, rest = md.partition("\n\n")
    if title and first.startswith("# ") and _norm(first[2:]) == _norm(title) and rest.strip():
        return rest
    return md


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
