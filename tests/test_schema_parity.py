"""every model-facing tool schema against a fixture written from the three documents
(``tests/fixtures/tool_contracts.json``): the parameters each document names, which are required, their
types, defaults, choices and limits. The schemas come from the same pydantic fields the validators enforce,
so a limit the model is told and the limit it meets cannot drift apart; this test keeps both on the
documents' numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_tools._catalog import ToolCatalog

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "tool_contracts.json").read_text())["tools"]
COMPARED = ("type", "default", "enum", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems")
CATALOG = ToolCatalog.builtin()


def _node(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """A property's schema with ``$ref`` followed and an optional field's ``anyOf [X, null]`` read as X."""
    defs = schema.get("$defs", {})
    while "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
    if len(options) == 1:
        outer = {k: v for k, v in node.items() if k != "anyOf"}
        node = {**_node(schema, options[0]), **outer}
    return node


def _problems(schema: dict[str, Any], obj: dict[str, Any], params: dict[str, Any], where: str) -> list[str]:
    found: list[str] = []
    props: dict[str, Any] = obj.get("properties", {})
    required = set(obj.get("required", []))
    for name, doc in params.items():
        if name not in props:
            found.append(f"{where}{name}: the document's parameter is missing")
            continue
        node = _node(schema, props[name])
        if doc.get("required", False) != (name in required):
            found.append(f"{where}{name}: required is {name in required}, the document says {doc.get('required')}")
        for key in COMPARED:
            if key in doc and (key not in node or node[key] != doc[key]):
                found.append(f"{where}{name}: {key} is {node.get(key, '(absent)')!r}, the document says {doc[key]!r}")
        if "items" in doc:
            item = _node(schema, node.get("items", {}))
            found += _problems(schema, item, doc["items"], f"{where}{name}[].")
    return found


def test_the_fixture_names_every_model_facing_tool() -> None:
    assert sorted(FIXTURE) == CATALOG.names()


@pytest.mark.parametrize("tool", sorted(FIXTURE))
def test_schema_matches_the_documents(tool: str) -> None:
    spec = CATALOG.get(tool)
    assert spec is not None
    schema = spec.parameters_schema()
    entry = FIXTURE[tool]
    # Exactly the document's parameters plus those the fixture lists as ours: none appears unannounced.
    assert set(schema.get("properties", {})) == set(entry["params"]) | set(entry.get("ours", [])), tool
    assert _problems(schema, schema, entry["params"], "") == []


def test_the_schema_the_model_is_sent_is_the_compared_one() -> None:
    """The provider request carries ``parameters_schema()`` itself (tests/test_tool_offer.py reads it off the
    wire), and it carries the limits: a spot check of the issue's examples."""
    search = CATALOG.get("web_search")
    ask = CATALOG.get("askUser")
    assert search is not None and ask is not None
    query = search.parameters_schema()["properties"]["query"]
    assert (query["minLength"], query["maxLength"]) == (1, 400)
    header = ask.parameters_schema()["$defs"]["AskQuestion"]["properties"]["header"]
    assert header["maxLength"] == 12
