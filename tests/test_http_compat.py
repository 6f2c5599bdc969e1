"""The HTTP API keeps what 1.0.0 offered (docs/upgrading.md): every route and method of the release's OpenAPI
document is still served, no request asks for a field the release did not require, no field the release
accepted or answered has gone, and every status code it documented is still documented. New routes, new
optional request fields and new response fields are allowed.

The release's document is tests/fixtures/compat/openapi-1.0.0.json, written once at the release from
``create_app(Settings(agents_file=None)).openapi()``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_tools._service.app import create_app
from agent_tools._settings import Settings

RELEASED = Path(__file__).parent / "fixtures" / "compat" / "openapi-1.0.0.json"
METHODS = {"get", "post", "put", "patch", "delete"}


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A schema with its top-level ``$ref`` followed into the document's components."""
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = doc["components"]["schemas"][name]
    return schema


def _body(doc: dict[str, Any], operation: dict[str, Any]) -> dict[str, Any] | None:
    content = operation.get("requestBody", {}).get("content", {})
    return _resolve(doc, content["application/json"]["schema"]) if "application/json" in content else None


def _answer(doc: dict[str, Any], response: dict[str, Any]) -> dict[str, Any] | None:
    content = response.get("content", {})
    return _resolve(doc, content["application/json"]["schema"]) if "application/json" in content else None


def breaks(released: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What ``current`` no longer offers of ``released``, one line each."""
    found: list[str] = []
    for path, item in released["paths"].items():
        for method in set(item) & METHODS:
            where = f"{method.upper()} {path}"
            now = current["paths"].get(path, {}).get(method)
            if now is None:
                found.append(f"{where}: gone")
                continue
            before_params = {(p["name"], p["in"]) for p in item[method].get("parameters", [])}
            now_params = {(p["name"], p["in"]): p for p in now.get("parameters", [])}
            found += [f"{where}: parameter {n} gone" for n in before_params - set(now_params)]
            required_before = {(p["name"], p["in"]) for p in item[method].get("parameters", []) if p.get("required")}
            found += [
                f"{where}: parameter {key[0]} now required"
                for key, p in now_params.items()
                if p.get("required") and key not in required_before
            ]
            body_before, body_now = _body(released, item[method]), _body(current, now)
            if body_before is not None:
                if body_now is None:
                    found.append(f"{where}: JSON body no longer accepted")
                else:
                    gone = set(body_before.get("properties", {})) - set(body_now.get("properties", {}))
                    new_required = set(body_now.get("required", [])) - set(body_before.get("required", []))
                    found += [f"{where}: request field {f} gone" for f in sorted(gone)]
                    found += [f"{where}: request field {f} now required" for f in sorted(new_required)]
            for status, response in item[method].get("responses", {}).items():
                if status not in now.get("responses", {}):
                    found.append(f"{where}: response {status} gone")
                    continue
                answer_before, answer_now = _answer(released, response), _answer(current, now["responses"][status])
                if answer_before is not None and answer_now is not None:
                    gone = set(answer_before.get("properties", {})) - set(answer_now.get("properties", {}))
                    found += [f"{where}: response {status} field {f} gone" for f in sorted(gone)]
    return found


def test_the_http_api_keeps_what_the_release_offered() -> None:
    released = json.loads(RELEASED.read_text())
    current = create_app(Settings(agents_file=None)).openapi()
    assert len(released["paths"]) >= 15
    assert breaks(released, current) == []


def test_a_breaking_change_is_caught() -> None:
    """The check fails for each kind of break it names (a check that cannot fail would pass any change)."""
    released = json.loads(RELEASED.read_text())
    changed = json.loads(RELEASED.read_text())
    del changed["paths"]["/sessions/{session_id}/stop"]
    start = changed["components"]["schemas"]["StartSession"]
    del start["properties"]["prompt"]
    start["required"] = [*start.get("required", []), "agent"]
    del changed["paths"]["/sessions"]["post"]["responses"]["201"]
    view = changed["components"]["schemas"]["SessionView"]
    del view["properties"][sorted(view["properties"])[0]]
    found = breaks(released, changed)
    assert "POST /sessions/{session_id}/stop: gone" in found
    assert "POST /sessions: request field prompt gone" in found
    assert "POST /sessions: request field agent now required" in found
    assert "POST /sessions: response 201 gone" in found
    assert any(line.startswith("GET /sessions/{session_id}: response 200 field") for line in found)
