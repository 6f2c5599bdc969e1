"""Every argument the model may send is bounded in the schema it sees: strings have a maximum
length, numbers a range, lists and maps a maximum size. The same schema is what the boundary enforces."""

from __future__ import annotations

from typing import Any

import pytest

from agent_tools._boundaries import schema_problems
from agent_tools._catalog.registry import builtin_specs

SPECS = builtin_specs()
# Bounded by an anchored pattern or an enum instead of a length.
BOUNDED_OTHERWISE = ("enum", "const", "pattern")


def _unbounded(schema: dict[str, Any], path: str, defs: dict[str, Any], inherited: dict[str, Any]) -> list[str]:
    if "$ref" in schema:
        return _unbounded(defs[schema["$ref"].split("/")[-1]], path, defs, {**inherited, **schema})
    here = {**inherited, **{k: v for k, v in schema.items() if k not in ("anyOf", "oneOf", "allOf")}}
    found: list[str] = []
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key, []):
            found += _unbounded(branch, path, defs, here)
    kind = schema.get("type")
    if kind == "string" and not any(k in here for k in ("maxLength", *BOUNDED_OTHERWISE)):
        found.append(f"{path}: string without maxLength")
    if kind in ("integer", "number"):
        if not any(k in here for k in ("maximum", "exclusiveMaximum", "enum", "const")):
            found.append(f"{path}: {kind} without maximum")
        if not any(k in here for k in ("minimum", "exclusiveMinimum", "enum", "const")):
            found.append(f"{path}: {kind} without minimum")
    if kind == "array":
        if "maxItems" not in here:
            found.append(f"{path}: array without maxItems")
        if isinstance(schema.get("items"), dict):
            found += _unbounded(schema["items"], path + "[]", defs, {})
    if kind == "object" or "properties" in schema:
        for name, sub in schema.get("properties", {}).items():
            found += _unbounded(sub, f"{path}.{name}", defs, {})
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            if "maxProperties" not in here:
                found.append(f"{path}: map without maxProperties")
            found += _unbounded(extra, path + ".*", defs, {})
    return found


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_every_argument_is_bounded_in_the_schema(spec: Any) -> None:
    schema = spec.parameters_schema()
    assert _unbounded(schema, spec.name, schema.get("$defs", {}), {}) == []


def test_the_limit_check_reads_the_schema_the_model_sees() -> None:
    spec = next(s for s in SPECS if s.name == "askUser")
    question = {
        "question": "x" * 5000 + "?",
        "header": "way too long a header",
        "options": [{"label": "a", "description": "b"}, {"label": "c", "description": "d"}],
    }
    problems = schema_problems(spec.parameters_schema(), {"questions": [question]})
    assert problems is not None
    assert "questions.0.question: must be at most 1,000 characters (got 5,001)" in problems
    assert "questions.0.header: must be at most 12 characters" in problems
    assert (
        schema_problems(spec.parameters_schema(), {"questions": [{**question, "question": "ok?", "header": "h"}]})
        is None
    )
