"""The path language of ``query_tool_result``: a small, jq-like subset. Pure.

Grammar (whitespace is not allowed between steps)::

    path    := "." | step+
    step    := "." key | "[" index "]" | "[" slice "]" | '["' text '"]' | "[]" | "[*]"
    key     := identifier characters (letters, digits, ``_``, ``-``, ``$``, ``@``)
    index   := integer (negative counts from the end)
    slice   := [start] ":" [stop]

``.results[0].name`` picks one value; ``[0:20]`` slices an array; ``.items[].id`` (or ``[*]``) maps the rest
of the path over every element of an array. A leading ``.`` is optional before ``[`` (``[0]`` == ``.[0]``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent_tools.errors import InvalidInput

_KEY = re.compile(r"[A-Za-z0-9_\-$@]+")
_INDEX = re.compile(r"-?\d+")
_SLICE = re.compile(r"(-?\d+)?:(-?\d+)?")


class PathError(InvalidInput):
    """The path cannot be parsed, or it does not fit the document; the message says where."""


@dataclass(frozen=True)
class Key:
    name: str


@dataclass(frozen=True)
class Index:
    index: int


@dataclass(frozen=True)
class Slice:
    start: int | None
    stop: int | None


@dataclass(frozen=True)
class Each:
    """``[]``: apply the remaining steps to every element."""


Step = Key | Index | Slice | Each


def parse_path(path: str) -> list[Step]:
    """Parse a path into steps; raises :class:`PathError` with the position of the problem."""
    text = path.strip()
    if text in ("", "."):
        return []
    steps: list[Step] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == ".":
            if i + 1 < len(text) and text[i + 1] == "[":
                i += 1  # ".[0]" is the same as "[0]"
                continue
            m = _KEY.match(text, i + 1)
            if not m:
                raise PathError(f"expected a key after '.' at position {i} in {path!r}")
            steps.append(Key(m.group(0)))
            i = m.end()
        elif ch == "[":
            close = _find_close(text, i, path)
            inner = text[i + 1 : close].strip()
            steps.append(_bracket(inner, path, i))
            i = close + 1
        else:
            raise PathError(
                f"unexpected {ch!r} at position {i} in {path!r}; paths look like ., .key, [0], [0:20], .a[0].b"
            )
    return steps


def _find_close(text: str, start: int, path: str) -> int:
    if text.startswith('["', start) or text.startswith("['", start):
        quote = text[start + 1]
        end = text.find(quote + "]", start + 2)
        if end < 0:
            raise PathError(f"unterminated quoted key at position {start} in {path!r}")
        return end + 1
    close = text.find("]", start)
    if close < 0:
        raise PathError(f"missing ']' for '[' at position {start} in {path!r}")
    return close


def _bracket(inner: str, path: str, pos: int) -> Step:
    if inner in ("", "*"):
        return Each()
    if len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "\"'":
        return Key(inner[1:-1])
    if _INDEX.fullmatch(inner):
        return Index(int(inner))
    m = _SLICE.fullmatch(inner)
    if m:
        return Slice(int(m.group(1)) if m.group(1) else None, int(m.group(2)) if m.group(2) else None)
    raise PathError(f'cannot read [{inner}] at position {pos} in {path!r}; use [0], [-1], [0:20], ["key"] or []')


def describe(value: Any) -> str:
    """A short type description used in error messages (``object with keys a, b`` / ``array of 3``)."""
    if isinstance(value, dict):
        keys = list(value)
        shown = ", ".join(keys[:10]) + (", ..." if len(keys) > 10 else "")
        return f"object with keys: {shown}" if keys else "empty object"
    if isinstance(value, list):
        return f"array of {len(value)} items"
    if value is None:
        return "null"
    return type(value).__name__


def evaluate(document: Any, steps: list[Step], *, _where: str = "") -> Any:
    """Apply ``steps`` to ``document``; raises :class:`PathError` naming the step that does not fit."""
    current = document
    where = _where or ""
    for n, step in enumerate(steps):
        if isinstance(step, Key):
            if not isinstance(current, dict):
                raise PathError(f"{where or '.'} is {describe(current)}, not an object; cannot take .{step.name}")
            if step.name not in current:
                raise PathError(f"{where or '.'} has no key {step.name!r}; it is {describe(current)}")
            current = current[step.name]
            where += f".{step.name}"
        elif isinstance(step, Index):
            if not isinstance(current, list):
                raise PathError(f"{where or '.'} is {describe(current)}, not an array; cannot take [{step.index}]")
            if not -len(current) <= step.index < len(current):
                raise PathError(f"{where or '.'}[{step.index}] is out of range; the array has {len(current)} items")
            current = current[step.index]
            where += f"[{step.index}]"
        elif isinstance(step, Slice):
            if not isinstance(current, list | str):
                raise PathError(f"{where or '.'} is {describe(current)}, not an array; cannot slice it")
            current = current[step.start : step.stop]
            where += f"[{'' if step.start is None else step.start}:{'' if step.stop is None else step.stop}]"
        else:
            if isinstance(current, dict):
                items = list(current.values())
            elif isinstance(current, list):
                items = current
            else:
                raise PathError(f"{where or '.'} is {describe(current)}; [] needs an array or object")
            rest = steps[n + 1 :]
            return [evaluate(item, rest, _where=f"{where}[{i}]") for i, item in enumerate(items)]
    return current


def query(document: Any, path: str) -> Any:
    """Parse and evaluate in one call."""
    return evaluate(document, parse_path(path))
