"""``json_query``: a small query language over a JSON document. Pure.

Syntax (a JSONPath/JMESPath blend that models already write correctly)::

    query      := path ( "|" function )*
    path       := [ "$" ] step*            -- "$" (or nothing) is the document root
    step       := "." name                 -- object member:  .items   .["odd key"]
                | "[" integer "]"          -- array element (negative counts from the end): [0]  [-1]
                | "[" [start] ":" [end] "]"-- slice: [1:3]  [:5]  [-2:]
                | "[*]" | ".*"             -- every element / every member value
                | ".." name                -- recursive descent: every member called name, at any depth
                | "[?" condition "]"       -- keep the elements for which condition holds
                | ".{" field ("," field)* "}"  -- build objects: .{name, city: address.city}
    condition  := term ( ("&&" | "||") term )*     with "!" for not and parentheses
    term       := operand [ op operand ]           op: == != < <= > >= =~ (regex) contains in
    operand    := @ | @.path | path (relative to the element) | "string" | 'string' | number
                | true | false | null
    function   := length | keys | values | first | last | sort | sort_by(path) | reverse | unique | sum
                | min | max | avg | flatten | count | type | limit(n)

A leading name needs no dot (``items[0].name``). Once a step can match many values (``[*]``, slices,
filters, ``..``) the result is a list and later steps apply to each value; a missing member is skipped in
a list and ``null`` for a single value. Examples::

    items[?price > 10 && tags contains "sale"].name | sort
    ..id | unique | length
    data.users[-1].{name, email: contact.email}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent_tools.errors import InvalidInput

MAX_QUERY = 1000


class JsonQueryError(InvalidInput):
    """The query is malformed or a function got the wrong kind of value; the message says where."""


@dataclass
class _Step:
    kind: str  # member, index, slice, wild, descend, filter, fields
    arg: Any = None


_NAME = re.compile(r"[A-Za-z_$][\w$-]*")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?")
_OPS = ("==", "!=", "<=", ">=", "=~", "<", ">")


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def error(self, msg: str) -> JsonQueryError:
        return JsonQueryError(f"{msg} at position {self.i} in {self.s!r}")

    def ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def peek(self, token: str) -> bool:
        self.ws()
        return self.s.startswith(token, self.i)

    def take(self, token: str) -> bool:
        if self.peek(token):
            self.i += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.take(token):
            raise self.error(f"expected {token!r}")

    def string(self) -> str:
        self.ws()
        quote = self.s[self.i]
        j = self.i + 1
        out = []
        while j < len(self.s) and self.s[j] != quote:
            if self.s[j] == "\\" and j + 1 < len(self.s):
                j += 1
            out.append(self.s[j])
            j += 1
        if j >= len(self.s):
            raise self.error("unterminated string")
        self.i = j + 1
        return "".join(out)

    def name(self) -> str:
        self.ws()
        if self.i < len(self.s) and self.s[self.i] in "\"'":
            return self.string()
        m = _NAME.match(self.s, self.i)
        if not m:
            raise self.error("expected a name")
        self.i = m.end()
        return m.group(0)

    def int_(self) -> int:
        self.ws()
        m = re.compile(r"-?\d+").match(self.s, self.i)
        if not m:
            raise self.error("expected an integer")
        self.i = m.end()
        return int(m.group(0))

    # path ----------------------------------------------------------------------------------------
    def path(self, *, leading_name: bool = True) -> list[_Step]:
        steps: list[_Step] = []
        self.ws()
        self.take("$")
        if leading_name:
            self.ws()
            if self.i < len(self.s) and (_NAME.match(self.s, self.i) or self.s[self.i] in "\"'"):
                steps.append(_Step("member", self.name()))
        while True:
            self.ws()
            if self.s.startswith("..", self.i):
                self.i += 2
                if self.take("*"):
                    steps.append(_Step("descend", None))
                else:
                    steps.append(_Step("descend", self.name()))
            elif self.s.startswith(".", self.i):
                self.i += 1
                if self.take("*"):
                    steps.append(_Step("wild"))
                elif self.take("{"):
                    steps.append(_Step("fields", self.fields()))
                elif self.peek("["):
                    continue
                else:
                    steps.append(_Step("member", self.name()))
            elif self.s.startswith("[", self.i):
                self.i += 1
                steps.append(self.bracket())
            else:
                return steps

    def bracket(self) -> _Step:
        if self.take("*"):
            self.expect("]")
            return _Step("wild")
        if self.take("?"):
            cond = self.condition()
            self.expect("]")
            return _Step("filter", cond)
        self.ws()
        if self.s[self.i : self.i + 1] in ("'", '"'):
            key = self.string()
            self.expect("]")
            return _Step("member", key)
        start = None if self.peek(":") else self.int_()
        if self.take(":"):
            end = None if self.peek("]") else self.int_()
            self.expect("]")
            return _Step("slice", (start, end))
        self.expect("]")
        return _Step("index", start)

    def fields(self) -> list[tuple[str, list[_Step]]]:
        out: list[tuple[str, list[_Step]]] = []
        while True:
            key = self.name()
            if self.take(":"):
                out.append((key, self.path()))
            else:
                out.append((key, [_Step("member", key)]))
            if self.take("}"):
                return out
            self.expect(",")

    # conditions ------------------------------------------------------------------------------------
    def condition(self) -> Any:
        left = self.conj()
        while self.take("||"):
            left = ("or", left, self.conj())
        return left

    def conj(self) -> Any:
        left = self.unary()
        while self.take("&&"):
            left = ("and", left, self.unary())
        return left

    def unary(self) -> Any:
        if self.take("!") and not self.peek("="):
            return ("not", self.unary())
        if self.take("("):
            inner = self.condition()
            self.expect(")")
            return inner
        left = self.operand()
        for op in (*_OPS, "contains", "in"):
            if self.peek(op):
                if op in ("contains", "in"):
                    end = self.i + len(op)
                    if end < len(self.s) and (self.s[end].isalnum() or self.s[end] == "_"):
                        continue
                self.i += len(op)
                return ("cmp", op, left, self.operand())
        return ("truthy", left)

    def operand(self) -> Any:
        self.ws()
        c = self.s[self.i : self.i + 1]
        if c in ("'", '"'):
            return ("lit", self.string())
        m = _NUMBER.match(self.s, self.i)
        if m:
            self.i = m.end()
            text = m.group(0)
            return ("lit", float(text) if any(ch in text for ch in ".eE") else int(text))
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(word, self.i) and not re.match(
                r"[\w$]", self.s[self.i + len(word) : self.i + len(word) + 1]
            ):
                self.i += len(word)
                return ("lit", value)
        if c == "[":
            end = self._matching("[", "]")
            try:
                value = json.loads(self.s[self.i : end + 1])
            except ValueError as exc:
                raise self.error("bad list literal") from exc
            self.i = end + 1
            return ("lit", value)
        if c == "@":
            self.i += 1
            return ("path", self.path(leading_name=False))
        return ("path", self.path())

    def _matching(self, open_: str, close: str) -> int:
        depth = 0
        for j in range(self.i, len(self.s)):
            if self.s[j] == open_:
                depth += 1
            elif self.s[j] == close:
                depth -= 1
                if depth == 0:
                    return j
        raise self.error(f"unbalanced {open_}")


_MISSING = object()


def _apply(steps: list[_Step], value: Any) -> tuple[list[Any], bool]:
    """Evaluate steps; returns (matches, is_multi)."""
    current = [value]
    multi = False
    for step in steps:
        nxt: list[Any] = []
        for v in current:
            if step.kind == "member":
                if isinstance(v, dict) and step.arg in v:
                    nxt.append(v[step.arg])
            elif step.kind == "index":
                if isinstance(v, list) and -len(v) <= step.arg < len(v):
                    nxt.append(v[step.arg])
            elif step.kind == "slice":
                if isinstance(v, list):
                    nxt.extend(v[step.arg[0] : step.arg[1]])
            elif step.kind == "wild":
                if isinstance(v, list):
                    nxt.extend(v)
                elif isinstance(v, dict):
                    nxt.extend(v.values())
            elif step.kind == "descend":
                nxt.extend(_descend(v, step.arg))
            elif step.kind == "filter":
                items = v if isinstance(v, list) else list(v.values()) if isinstance(v, dict) else []
                nxt.extend(item for item in items if _truthy(_cond(step.arg, item)))
            elif step.kind == "fields":
                nxt.append({key: _single(*_apply(path, v)) for key, path in step.arg})
        if step.kind in ("slice", "wild", "descend", "filter"):
            multi = True
        current = nxt
    return current, multi


def _single(matches: list[Any], multi: bool) -> Any:
    if multi:
        return matches
    return matches[0] if matches else None


def _descend(value: Any, name: str | None) -> list[Any]:
    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop(0)
        if isinstance(v, dict):
            for k, child in v.items():
                if name is None or k == name:
                    out.append(child)
                stack.append(child)
        elif isinstance(v, list):
            stack.extend(v)
    return out


def _truthy(v: Any) -> bool:
    """JMESPath truth: null, false, "", [] and {} are false; every number (0 too) is true."""
    if v is None or v is False:
        return False
    return not (isinstance(v, (str, list, dict)) and len(v) == 0)


def _operand(node: Any, item: Any) -> Any:
    if node[0] == "lit":
        return node[1]
    return _single(*_apply(node[1], item))


def _cond(node: Any, item: Any) -> Any:
    kind = node[0]
    if kind == "or":
        return _truthy(_cond(node[1], item)) or _truthy(_cond(node[2], item))
    if kind == "and":
        return _truthy(_cond(node[1], item)) and _truthy(_cond(node[2], item))
    if kind == "not":
        return not _truthy(_cond(node[1], item))
    if kind == "truthy":
        return _operand(node[1], item)
    _, op, left_node, right_node = node
    left, right = _operand(left_node, item), _operand(right_node, item)
    try:
        if op == "==":
            return left == right
        if op == "!=":
            return left != right
        if op == "=~":
            return isinstance(left, str) and isinstance(right, str) and re.search(right, left) is not None
        if op == "contains":
            if isinstance(left, str) and isinstance(right, str):
                return right.lower() in left.lower()
            return isinstance(left, (list, dict)) and right in left
        if op == "in":
            return isinstance(right, (list, dict, str)) and left in right
        if left is None or right is None or isinstance(left, bool) != isinstance(right, bool):
            return False
        if isinstance(left, str) != isinstance(right, str):
            return False
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    except (TypeError, re.error):
        return False


def _function(name: str, arg: Any, value: Any) -> Any:
    def need_list() -> list[Any]:
        if isinstance(value, list):
            return value
        raise JsonQueryError(f"{name} needs a list, got {type(value).__name__}")

    if name == "length" or name == "count":
        return len(value) if isinstance(value, (list, dict, str)) else 0 if value is None else 1
    if name == "keys":
        if isinstance(value, dict):
            return list(value)
        raise JsonQueryError(f"keys needs an object, got {type(value).__name__}")
    if name == "values":
        if isinstance(value, dict):
            return list(value.values())
        raise JsonQueryError(f"values needs an object, got {type(value).__name__}")
    if name == "first":
        return need_list()[0] if need_list() else None
    if name == "last":
        return need_list()[-1] if need_list() else None
    if name == "reverse":
        return list(reversed(need_list()))
    if name == "flatten":
        return [x for v in need_list() for x in (v if isinstance(v, list) else [v])]
    if name == "unique":
        out: list[Any] = []
        for v in need_list():
            if v not in out:
                out.append(v)
        return out
    if name == "sort":
        try:
            return sorted(need_list(), key=lambda v: (v is None, v))
        except TypeError as exc:
            raise JsonQueryError("sort needs values of one type") from exc
    if name == "sort_by":
        try:
            return sorted(need_list(), key=lambda v: (_single(*_apply(arg, v)) is None, _single(*_apply(arg, v))))
        except TypeError as exc:
            raise JsonQueryError("sort_by needs keys of one type") from exc
    if name == "limit":
        return need_list()[: int(arg)]
    if name in ("sum", "min", "max", "avg"):
        nums = [v for v in need_list() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if name == "sum":
            return sum(nums)
        if not nums:
            return None
        return min(nums) if name == "min" else max(nums) if name == "max" else sum(nums) / len(nums)
    if name == "type":
        return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
            type(value), "number"
        )
    raise JsonQueryError(
        f"unknown function {name!r}; known: length keys values first last sort sort_by reverse "
        "unique sum min max avg flatten count type limit"
    )


def parse_document(document: Any) -> Any:
    """A JSON value, or a string holding JSON text (parsed); other strings stay strings."""
    if isinstance(document, str):
        text = document.strip()
        if text[:1] in ("{", "[", '"') or text in ("true", "false", "null") or _NUMBER.fullmatch(text):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise JsonQueryError(f"document is not valid JSON: {exc}") from exc
    return document


def json_query(document: Any, query: str) -> Any:
    """Evaluate ``query`` (see the module docstring) over ``document``."""
    if len(query) > MAX_QUERY:
        raise JsonQueryError(f"query is longer than {MAX_QUERY} characters")
    parser = _Parser(query)
    steps = parser.path()
    matches, multi = _apply(steps, parse_document(document))
    value = _single(matches, multi)
    while parser.take("|"):
        name = parser.name()
        arg: Any = None
        if parser.take("("):
            arg = parser.int_() if name == "limit" else parser.path()
            parser.expect(")")
        value = _function(name, arg, value)
    parser.ws()
    if parser.i != len(query):
        raise parser.error("unexpected text")
    return value
