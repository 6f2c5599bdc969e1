"""What the saved-result readers compute: the line view, pages of it, regex search, JSON query. Pure.

The line view is what ``read_tool_result`` pages through and what ``search_tool_result`` offsets point
into, so both tools agree on line numbers:

* a JSON result is viewed pretty-printed (indent 2), so a one-line 10 MB API response still pages by line;
* any line longer than :data:`WRAP_CHARS` is wrapped into several view lines, so every character is
  reachable by ``read_tool_result`` and no single line can flood the model's context.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

from agent_tools._errors import AgentToolsError, InvalidInput
from agent_tools.contracts._query import JsonQueryError, describe, normalize

WRAP_CHARS = 2_000
# A page stops early when it would exceed this many characters (the next offset says where to go on).
PAGE_CHAR_BUDGET = 40_000
CONTEXT_CHARS = 120
# Counting matches past the ones returned is bounded too: a pattern that matches every character of a
# 10 MB result must not spend the whole time budget counting.
COUNT_CAP = 10_000
REGEX_TIMEOUT_SECONDS = 2.0


@dataclass
class LineView:
    """The text as the readers see it, with the start offset of every view line."""

    text: str
    starts: list[int] = field(default_factory=list)

    @property
    def line_count(self) -> int:
        return len(self.starts)

    def line(self, n: int) -> str:
        start = self.starts[n]
        end = self.starts[n + 1] if n + 1 < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\n")

    def line_of(self, pos: int) -> int:
        """The view line that holds character ``pos``."""
        return max(0, bisect.bisect_right(self.starts, pos) - 1)


def view_text(content: str, *, is_json: bool) -> str:
    """The text the readers work on: pretty JSON for JSON results, else the content itself."""
    if is_json:
        try:
            return json.dumps(json.loads(content), indent=2, ensure_ascii=False)
        except ValueError:
            return content
    return content


def build_view(content: str, *, is_json: bool) -> LineView:
    text = view_text(content, is_json=is_json)
    starts: list[int] = []
    pos = 0
    n = len(text)
    while pos < n or not starts:
        starts.append(pos)
        nl = text.find("\n", pos)
        end = n if nl < 0 else nl
        # Wrap a long physical line into WRAP_CHARS pieces.
        while end - pos > WRAP_CHARS:
            pos += WRAP_CHARS
            starts.append(pos)
        if nl < 0:
            break
        pos = nl + 1
        if pos >= n:
            break
    return LineView(text=text, starts=starts)


@dataclass(frozen=True)
class Page:
    offset: int
    lines: list[str]
    total_lines: int

    @property
    def next_offset(self) -> int | None:
        end = self.offset + len(self.lines)
        return end if end < self.total_lines else None


def read_lines(view: LineView, offset: int, limit: int, *, char_budget: int = PAGE_CHAR_BUDGET) -> Page:
    """Lines ``offset..offset+limit`` of the view, stopping early at ``char_budget`` characters."""
    lines: list[str] = []
    used = 0
    for n in range(offset, min(offset + limit, view.line_count)):
        line = view.line(n)
        if lines and used + len(line) + 1 > char_budget:
            break
        lines.append(line)
        used += len(line) + 1
    return Page(offset=offset, lines=lines, total_lines=view.line_count)


def render_page(ref: str, page: Page) -> str:
    """Header, then the lines. The header carries what the model needs to continue."""
    if not page.lines:
        return f"[ref={ref}: offset {page.offset} is past the end; the result has {page.total_lines:,} lines]"
    last = page.offset + len(page.lines) - 1
    head = f"[ref={ref}: lines {page.offset}-{last} of {page.total_lines:,}"
    head += f"; next offset={page.next_offset}]" if page.next_offset is not None else "; end of result]"
    return head + "\n" + "\n".join(page.lines)


class PatternError(InvalidInput):
    """The pattern is not a valid Python regular expression."""


class PatternTimeout(AgentToolsError, TimeoutError):
    """The pattern ran past the time budget (catastrophic backtracking, or far too many matches)."""


@dataclass(frozen=True)
class Match:
    offset: int
    match: str
    before: str
    after: str


@dataclass(frozen=True)
class SearchOutcome:
    matches: list[Match]
    total: int
    total_is_lower_bound: bool
    total_lines: int


def compile_pattern(pattern: str) -> Any:
    """Validate with :mod:`re` (the contract is *Python* regex syntax), run with :mod:`regex` (it has a timeout).

    ``re.MULTILINE`` is on so that ``^`` and ``$`` anchor at line starts and ends, as a line-oriented reader
    suggests; inline flags such as ``(?i)`` work as usual.
    """
    try:
        re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        raise PatternError(f"invalid regular expression {pattern!r}: {exc.msg}{where}") from exc
    import regex  # type: ignore[import-untyped]  # (ships no stubs)

    try:
        return regex.compile(pattern, flags=regex.V0 | regex.MULTILINE)
    except regex.error as exc:  # pragma: no cover - re accepted it; regex is a superset of re's syntax
        raise PatternError(f"invalid regular expression {pattern!r}: {exc}") from exc


def search(
    view: LineView,
    pattern: str,
    *,
    max_matches: int,
    context: int = CONTEXT_CHARS,
    timeout: float | None = None,
) -> SearchOutcome:
    """Up to ``max_matches`` matches with ``context`` characters either side; raises PatternError/PatternTimeout.

    The timeout covers the whole scan (the regex module checks it while matching), so a backtracking bomb
    and a pattern that matches millions of times are both stopped.
    """
    compiled = compile_pattern(pattern)
    timeout = REGEX_TIMEOUT_SECONDS if timeout is None else timeout
    text = view.text
    matches: list[Match] = []
    total = 0
    try:
        for m in compiled.finditer(text, timeout=timeout, concurrent=True):
            total += 1
            if len(matches) < max_matches:
                start, end = m.span()
                matches.append(
                    Match(
                        offset=view.line_of(start),
                        match=m.group(0)[: 4 * context],
                        before=text[max(0, start - context) : start],
                        after=text[end : end + context],
                    )
                )
            elif total >= COUNT_CAP:
                return SearchOutcome(matches, total, True, view.line_count)
    except TimeoutError as exc:
        if matches:
            # Partial results are still useful; the count says they are partial.
            return SearchOutcome(matches, total, True, view.line_count)
        raise PatternTimeout(
            f"the pattern {pattern!r} ran longer than {timeout:g} s and was stopped; simplify it (avoid nested "
            "quantifiers such as (a+)+) or search for a more specific literal"
        ) from exc
    return SearchOutcome(matches, total, False, view.line_count)


# ---- JSON query --------------------------------------------------------------------------------------


def key_step(key: str) -> str:
    """The path step that selects ``key`` (``.name`` or ``["odd key"]``)."""
    return f".{key}" if re.fullmatch(r"[A-Za-z0-9_\-$@]+", key) else json.dumps([key])


def render_query(ref: str, document: Any, path: str, value: Any, max_chars: int) -> str:
    """The value a query found at ``path`` as JSON, cut to ``max_chars`` with a note on how to narrow it.

    Raises:
        JsonQueryError: the path selects nothing (the message describes the document, to aim again).
    """
    if value is None and normalize(path) != "@":
        raise JsonQueryError(
            f"it selects nothing (a missing key, an index out of range, or a step that does not fit); "
            f"the result is {describe(document)}"
        )
    rendered = json.dumps(value, indent=2, ensure_ascii=False)
    head = f"[ref={ref} path={path.strip() or '.'}: {describe(value)}, {len(rendered):,} characters]"
    if len(rendered) <= max_chars:
        return head + "\n" + rendered
    hint = "narrow the path"
    if isinstance(value, list):
        hint = "narrow the path, e.g. [0:20] or [0]"
    elif isinstance(value, dict):
        keys = list(value)[:5]
        base = "" if path.strip() in ("", ".") else path.strip()
        hint = "narrow the path, e.g. " + ", ".join(base + key_step(str(k)) for k in keys)
    return (
        head
        + "\n"
        + rendered[:max_chars]
        + f"\n[... cut at {max_chars:,} of {len(rendered):,} characters; {hint}, or raise max_chars (up to 20,000)]"
    )
