"""One query language over JSON, two faces: codai's ``json_query`` and FYAI's ``query_tool_result``. Pure.

The language is JMESPath (https://jmespath.org, the ``jmespath`` library: AWS's CLI and boto use it), with
the habits of jq and JSONPath that the contracts' own examples show accepted as well::

    .                      ->  @                  (the whole document)
    .results[0].name       ->  results[0].name    (a leading "." is dropped)
    $.store.items          ->  store.items        (JSONPath's "$." too)
    [0:20]                 ->  [0:20]             (slices as they are)
    .items[].id            ->  items[].id         (every element's id)

Beyond paths, JMESPath filters, projects and calls functions::

    items[?price > `10`].name | sort(@)
    items[?contains(tags, 'sale')] | length(@)
    items[*].{name: name, city: address.city}
    sort_by(items, &price)[-1].name

Why JMESPath and not jq or a language of our own: it covers both contracts' examples, it is a well-kept
library, and an expression can neither loop nor backtrack (no recursion, no regular expressions), so its
cost is bounded by the document's size. Activities still run queries off the event loop with a time limit.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jmespath
import jmespath.exceptions
import jmespath.parser

from agent_tools._boundaries import MAX_JSON_DEPTH, json_depth
from agent_tools._errors import InvalidInput

MAX_QUERY_CHARS = 1000
QUERY_TIMEOUT_SECONDS = 5.0
"""What an activity waits for one query (JMESPath's cost is bounded by the document, which is bounded)."""


class JsonQueryError(InvalidInput):
    """The query does not parse, or a function got the wrong kind of value; the message says where."""


def normalize(expression: str) -> str:
    """The JMESPath expression for what a model wrote (see the module docstring)."""
    text = expression.strip()
    if text in ("", ".", "$", "@"):
        return "@"
    if text.startswith("$."):
        text = text[2:]
    elif text.startswith("$["):
        text = text[1:]
    if text.startswith(".") and not text.startswith(".."):
        text = text[1:]
    return text or "@"


@functools.lru_cache(maxsize=512)
def compile_query(expression: str) -> jmespath.parser.ParsedResult:
    """Parse once; raises :class:`JsonQueryError` with the parser's own account of what is wrong."""
    if len(expression) > MAX_QUERY_CHARS:
        raise JsonQueryError(f"the query is longer than {MAX_QUERY_CHARS} characters")
    try:
        return jmespath.compile(normalize(expression))
    except jmespath.exceptions.JMESPathError as exc:
        raise JsonQueryError(f"cannot read the query {expression!r}: {_first_line(exc)}") from None


def run_query(document: Any, expression: str) -> Any:
    """Evaluate ``expression`` over ``document``; a missing path gives None (JMESPath's null)."""
    compiled = compile_query(expression)
    try:
        return compiled.search(document)
    except jmespath.exceptions.JMESPathError as exc:
        raise JsonQueryError(f"the query {expression!r} cannot run on this document: {_first_line(exc)}") from None


def parse_document(document: Any) -> Any:
    """A JSON value, or a string holding JSON text (parsed); other strings stay strings. Refuses documents
    nested deeper than the engine's decoders take."""
    if isinstance(document, str):
        text = document.strip()
        if text[:1] in ("{", "[", '"') or text in ("true", "false", "null") or _is_number(text):
            try:
                document = json.loads(text)
            except ValueError as exc:
                raise JsonQueryError(f"document is not valid JSON: {exc}") from exc
            except RecursionError:
                raise JsonQueryError(f"document is nested deeper than {MAX_JSON_DEPTH} levels") from None
    if json_depth(document) > MAX_JSON_DEPTH:
        raise JsonQueryError(f"document is nested deeper than {MAX_JSON_DEPTH} levels")
    return document


def describe(value: Any) -> str:
    """A short type description (``object with keys: a, b`` / ``array of 3 items``)."""
    if isinstance(value, dict):
        keys = list(value)
        shown = ", ".join(map(str, keys[:10])) + (", ..." if len(keys) > 10 else "")
        return f"object with keys: {shown}" if keys else "empty object"
    if isinstance(value, list):
        return f"array of {len(value)} items"
    if value is None:
        return "null"
    return {bool: "boolean", str: "string", int: "number", float: "number"}.get(type(value), type(value).__name__)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
