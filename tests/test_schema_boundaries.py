"""Every tool's schema against its validator, at the schema's own boundaries.

For each bound the schema the model sees states (``minimum``/``maximum``, ``minLength``/``maxLength``,
``minItems``/``maxItems``, at any depth), a call at the bound must be accepted and a call one past it
refused, by the tool's validator (``ToolSpec.validate_arguments``, what a call meets). Each call is a valid
example (tests/support/hostile_cases.py) with one value moved to the boundary, so a refusal can only come
from that value. Where a contract clamps instead of refusing, the clamped value is checked.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_tools._catalog.registry import builtin_specs
from agent_tools._catalog.spec import ToolSpec
from tests.support.hostile_cases import EXAMPLES

SPECS = {s.name: s for s in builtin_specs()}
# Contracts that clamp a value past the bound instead of refusing it: (tool, field) -> the value it reads as.
# codai: spawn_agent's max_steps is "1 - 12, clamped to the role's own maximum"; FYAI: wait_for_event's
# "maximum is 3,300 seconds".
CLAMPED: dict[tuple[str, str], str] = {
    ("spawn_agent", "max_steps"): "maximum",
    ("wait_for_event", "timeout_seconds"): "maximum",
}


@dataclass
class Case:
    path: tuple[str | int, ...]
    keyword: str
    value: Any
    accept: bool

    @property
    def label(self) -> str:
        where = ".".join(str(p) for p in self.path)
        return f"{where} {self.keyword} {'at' if self.accept else 'past'} bound"


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    defs = schema.get("$defs", {})
    while "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:
        node = {**_resolve(schema, options[0]), **{k: v for k, v in node.items() if k != "anyOf"}}
    return node


def _text(base: Any, length: int) -> str:
    """A string of ``length`` characters shaped like ``base`` (its first and last characters kept: a
    question still ends with "?", a URL still starts with its scheme)."""
    text = base if isinstance(base, str) and base else "a"
    if length <= len(text):
        return text[:length] if length < 2 or len(text) < 2 else text[: length - 1] + text[-1]
    return text[:-1] + "a" * (length - len(text)) + text[-1]


# A string the schema also bounds by a pattern: the longest value the pattern allows, by (tool, field).
LONGEST: dict[tuple[str, str], str] = {
    ("web_search", "lang"): "en-gb",
    ("web_search", "country"): "gb",
    ("web_search", "published_after"): "2026-01-31",
    ("web_search", "published_before"): "2026-12-01",
}


def _variant(schema: dict[str, Any], node: dict[str, Any], item: Any, i: int) -> Any:
    """The ``i``-th distinct copy of a list item (lists that refuse repeats: askUser's questions, labels):
    free text gets a letter before its last character; choices, patterns and other values stay."""
    node = _resolve(schema, node)
    if isinstance(item, str):
        fixed = any(k in node for k in ("enum", "const", "pattern")) or i == 0 or len(item) < 2
        return item if fixed else item[:-1] + "abcdefghijklmnopqrstuvwxyz"[i % 26] + item[-1]
    if isinstance(item, dict):
        props = node.get("properties", {})
        return {k: _variant(schema, props.get(k, {}), v, i) for k, v in item.items()}
    if isinstance(item, list):
        return [_variant(schema, node.get("items", {}), v, i) for v in item]
    return copy.deepcopy(item)


def _copies(schema: dict[str, Any], node: dict[str, Any], item: Any, n: int) -> list[Any]:
    return [_variant(schema, node.get("items", {}), item, i) for i in range(n)]


def _cases(
    tool: str, schema: dict[str, Any], node: dict[str, Any], value: Any, path: tuple[str | int, ...]
) -> Iterator[Case]:
    node = _resolve(schema, node)
    kind = node.get("type")
    if kind in ("integer", "number"):
        if "minimum" in node:
            yield Case(path, "minimum", node["minimum"], True)
            yield Case(path, "minimum", node["minimum"] - 1, False)
        if "maximum" in node:
            yield Case(path, "maximum", node["maximum"], True)
            yield Case(path, "maximum", node["maximum"] + 1, False)
    longest = LONGEST.get((tool, ".".join(str(p) for p in path)))
    if kind == "string" and longest is not None:
        assert len(longest) == node["maxLength"], f"{tool} {path}: the sample is not the longest value"
        assert "pattern" in node, f"{tool} {path}: a value with a form of its own must state it (pattern)"
        yield Case(path, "maxLength", longest, True)
        yield Case(path, "maxLength", longest + longest[-1], False)
    elif kind == "string":
        if "maxLength" in node:
            yield Case(path, "maxLength", _text(value, node["maxLength"]), True)
            yield Case(path, "maxLength", _text(value, node["maxLength"] + 1), False)
        if node.get("minLength", 0) > 0:
            yield Case(path, "minLength", _text(value, node["minLength"]), True)
            yield Case(path, "minLength", _text(value, node["minLength"] - 1), False)
    if kind == "array" and isinstance(value, list) and value:
        item = value[0]
        if "maxItems" in node:
            yield Case(path, "maxItems", _copies(schema, node, item, node["maxItems"]), True)
            yield Case(path, "maxItems", _copies(schema, node, item, node["maxItems"] + 1), False)
        if node.get("minItems", 0) > 0:
            yield Case(path, "minItems", _copies(schema, node, item, node["minItems"]), True)
            yield Case(path, "minItems", _copies(schema, node, item, node["minItems"] - 1), False)
        if isinstance(node.get("items"), dict):
            yield from _cases(tool, schema, node["items"], item, (*path, 0))
    if isinstance(node.get("properties"), dict) and (value is None or isinstance(value, dict)):
        for name, sub in node["properties"].items():
            given = value.get(name) if isinstance(value, dict) else None
            yield from _cases(tool, schema, sub, given, (*path, name))


def _set(example: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(example)
    target: Any = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return out


def _get(parsed: BaseModel, path: tuple[str | int, ...]) -> Any:
    value: Any = parsed
    for step in path:
        value = value[step] if isinstance(step, int) else getattr(value, step)
    return value


def _all_cases() -> list[tuple[str, Case]]:
    out: list[tuple[str, Case]] = []
    for name, spec in sorted(SPECS.items()):
        schema = spec.parameters_schema()
        out += [(name, case) for case in _cases(name, schema, schema, EXAMPLES[name], ())]
    return out


CASES = _all_cases()


def test_every_tool_has_an_example_and_cases() -> None:
    assert sorted(EXAMPLES) == sorted(SPECS)
    assert len(CASES) > 150 and {tool for tool, _ in CASES} >= {"createLoop", "createGoal", "todoWrite", "askUser"}


@pytest.mark.parametrize(("tool", "case"), CASES, ids=[f"{t}: {c.label}" for t, c in CASES])
def test_the_validator_enforces_what_the_schema_says(tool: str, case: Case) -> None:
    spec: ToolSpec = SPECS[tool]
    arguments = _set(EXAMPLES[tool], case.path, case.value)
    clamp = CLAMPED.get((tool, ".".join(str(p) for p in case.path)))
    if case.accept or clamp == case.keyword:
        try:
            parsed = spec.validate_arguments(arguments)
        except ValidationError as exc:
            pytest.fail(f"refused at the schema's bound: {exc}")
        if clamp == case.keyword and not case.accept:
            assert _get(parsed, case.path) == case.value - 1, "clamped to the bound"
    else:
        with pytest.raises(ValidationError):
            spec.validate_arguments(arguments)


@pytest.mark.parametrize(
    ("tool", "field", "value"),
    [
        ("web_search", "published_after", "20260101"),  # ISO's basic form: not the YYYY-MM-DD the schema states
        ("web_search", "published_before", "2026-13-01"),
        ("web_search", "lang", "english"),
        ("web_search", "country", "g1"),
    ],
)
def test_a_value_the_stated_pattern_refuses_is_refused(tool: str, field: str, value: str) -> None:
    spec = SPECS[tool]
    assert "pattern" in _resolve(spec.parameters_schema(), spec.parameters_schema()["properties"][field])
    with pytest.raises(ValidationError):
        spec.validate_arguments({**EXAMPLES[tool], field: value})
