"""Text shaping for fetched pages: Markdown tidy-up and Markdown-to-plain-text, truncation at a boundary,
and the focus window (the paragraphs that best match a short query). Pure."""

from __future__ import annotations

import math
import re
from collections import Counter

_WORD = re.compile(r"[\w][\w'-]*", re.UNICODE)
_STOP = frozenset(
    "a an the and or of to in on for with by at from is are was were be been it this that these those as "
    "how what why when which who do does did can could should would will i you we they he she its into "
    "about over under than then there here not no yes".split()
)


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def tidy_markdown(md: str) -> str:
    """Normalise extractor output: blank line around fences, no trailing spaces, at most one blank line."""
    out: list[str] = []
    in_code = False
    for line in md.replace("\r\n", "\n").split("\n"):
        stripped = line.rstrip()
        if stripped.lstrip().startswith("```"):
            if not in_code and out and out[-1] != "":
                out.append("")
            out.append(stripped)
            in_code = not in_code
            if not in_code:
                out.append("")
            continue
        if in_code:
            out.append(line.rstrip("\n"))
            continue
        if stripped == "" and out and out[-1] == "":
            continue
        if not re.match(r"^\s*([-*+]|\d+[.)])\s", stripped):
            stripped = stripped.lstrip()  # stray indentation outside lists would read as a code block
        out.append(stripped)
    return "\n".join(out).strip() + ("\n" if out else "")


_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
_PRIVATE = 0xF0000  # supplementary private use area: never in a page's text, far from every ASCII mark
_UNESCAPE = re.compile("[\U000f0020-\U000f007e]")


def markdown_to_text(md: str) -> str:
    """Plain text from Markdown: link text without URLs, no emphasis marks, headings and tables flattened."""
    lines: list[str] = []
    in_code = False
    for line in md.split("\n"):
        if line.strip().startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            lines.append(line)
            continue
        if re.match(r"^\s*\|?\s*:?-{3,}", line):
            continue  # table separator row
        # Markdown escapes (output\_dir, \*) stand aside as private-use characters while the marks are
        # removed, and come back as the plain characters.
        s = _ESCAPED.sub(lambda m: chr(_PRIVATE + ord(m.group(1))), line)
        s = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", s)
        s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)
        s = re.sub(r"^\s{0,3}#{1,6}\s+", "", s)
        s = re.sub(r"^\s*>\s?", "", s)
        s = re.sub(r"(\*\*|__)(.+?)\1", r"\2", s)
        s = re.sub(r"(?<![\w*])([*_])(?!\s)(.+?)(?<!\s)\1(?![\w*])", r"\2", s)
        s = re.sub(r"`([^`]*)`", r"\1", s)
        if s.strip().startswith("|"):
            s = " | ".join(c.strip() for c in s.strip().strip("|").split("|"))
        lines.append(_UNESCAPE.sub(lambda m: chr(ord(m.group(0)) - _PRIVATE), s).rstrip())
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def truncate(text: str, max_chars: int) -> tuple[str, bool]:
    """Cut to ``max_chars`` at a paragraph or sentence boundary when one is near; say whether it cut.
    A code fence left open by the cut is closed (within the limit) so the rest does not read as code."""
    if len(text) <= max_chars:
        return text, False
    budget = max_chars - 4  # room for a closing fence
    cut = text[:budget]
    for sep in ("\n\n", "\n", ". "):
        pos = cut.rfind(sep)
        if pos >= budget * 0.7:
            cut = cut[: pos + (1 if sep == ". " else 0)]
            break
    cut = cut.rstrip()
    if sum(1 for line in cut.split("\n") if line.lstrip().startswith("```")) % 2:
        cut += "\n```"
    return cut, True


def _stem(word: str) -> str:
    """A light suffix strip so "retries" finds "retry" and "hooks" finds "hook" (no language data needed)."""
    if len(word) > 4:
        if word.endswith("ies"):
            return word[:-3] + "y"
        if word.endswith("es") and word[:-2].endswith(("x", "z", "ch", "sh")):
            return word[:-2]
        for suffix in ("ing", "ed", "s"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
                return word[: -len(suffix)]
    return word


def _terms(text: str) -> list[str]:
    return [_stem(w) for w in words(text)]


def _blocks(md: str) -> list[str]:
    """Paragraph-level blocks; a fenced code block stays whole."""
    blocks: list[str] = []
    current: list[str] = []
    in_code = False
    for line in md.split("\n"):
        if line.strip().startswith("```"):
            in_code = not in_code
        if not in_code and line.strip() == "" and current:
            blocks.append("\n".join(current))
            current = []
            continue
        if line.strip() or in_code:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def _is_heading(block: str) -> bool:
    return bool(re.match(r"^#{1,6}\s", block)) and "\n" not in block


def focus_window(md: str, focus: str, max_chars: int) -> tuple[str, bool]:
    """The paragraphs that best match ``focus``, in document order, each under its nearest heading.

    Scoring is BM25 over the page's own blocks (term frequency saturation, rare words weigh more), so a
    paragraph that mentions every focus word once beats one that repeats a single common word. Gaps are
    marked with ``…``. Returns (text, truncated); truncated is True when anything was left out.
    """
    blocks = _blocks(md)
    terms = [_stem(w) for w in words(focus) if w not in _STOP] or _terms(focus)
    if not blocks or not terms:
        return truncate(md, max_chars)
    scores = _bm25_scores(blocks, set(terms))
    if max(scores) <= 0:
        text, cut = truncate(md, max_chars)
        return text, cut
    order = sorted(range(len(blocks)), key=lambda i: (-scores[i], i))
    chosen: set[int] = set()
    used = 0
    for i in order:
        if scores[i] <= 0:
            break
        if _is_heading(blocks[i]):
            continue  # a heading comes with the paragraphs under it, never alone
        extra = len(blocks[i]) + 2
        heading = next((j for j in range(i - 1, -1, -1) if _is_heading(blocks[j])), None)
        if heading is not None and heading not in chosen:
            extra += len(blocks[heading]) + 2
        if used + extra > max_chars:
            if not chosen:
                text, _ = truncate(blocks[i], max_chars)
                return text, True
            continue
        chosen.add(i)
        if heading is not None:
            chosen.add(heading)
        used += extra
    if not chosen:  # only headings matched: the start of the page is the best window there is
        return truncate(md, max_chars)
    text = _join_blocks(blocks, chosen, max_chars)
    return text, len(chosen) < len(blocks)


def _bm25_scores(blocks: list[str], terms: set[str]) -> list[float]:
    """Each block's BM25 score for ``terms`` over the page's own blocks; a lone heading counts half."""
    tokenised = [Counter(_terms(b)) for b in blocks]
    n = len(blocks)
    avg_len = sum(sum(c.values()) for c in tokenised) / n or 1.0
    df = {t: sum(1 for c in tokenised if t in c) for t in terms}
    scores: list[float] = []
    for i, counts in enumerate(tokenised):
        length = sum(counts.values()) or 1
        score = 0.0
        for t in terms:
            tf = counts.get(t, 0)
            if not tf:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avg_len))
        if _is_heading(blocks[i]):
            score *= 0.5  # a heading alone carries no answer; its paragraph does
        scores.append(score)
    return scores


def _join_blocks(blocks: list[str], chosen: set[int], max_chars: int) -> str:
    """The chosen blocks in document order, ``…`` where blocks were left out, within ``max_chars``."""
    parts: list[str] = []
    last = -1
    for i in sorted(chosen):
        if parts and i != last + 1:
            parts.append("…")
        parts.append(blocks[i])
        last = i
    text = "\n\n".join(parts)
    if len(text) > max_chars:  # the gap markers are not in the budget the blocks were chosen by
        text, _ = truncate(text, max_chars)
    return text


def word_f1(predicted: str, truth: str) -> tuple[float, float, float]:
    """Bag-of-words precision, recall and F1, as article-extraction benchmarks score an extractor."""
    p, t = Counter(words(predicted)), Counter(words(truth))
    overlap = sum((p & t).values())
    if not overlap:
        return 0.0, 0.0, 0.0
    precision = overlap / sum(p.values())
    recall = overlap / sum(t.values())
    return precision, recall, 2 * precision * recall / (precision + recall)
