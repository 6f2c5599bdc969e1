"""The session routes' OpenAPI document, their settings from the environment, and keys kept out of what
the service says and logs (no Temporal needed: every request here is refused before it reaches one)."""

from __future__ import annotations

import json
import logging
import re

import httpx
import pytest

from agent_tools._errors import ConfigurationError
from agent_tools._service.app import create_app
from agent_tools._settings import Settings
from agent_tools.contracts._service import ServiceSettings

SECRET = "k-secret-0123456789abcdef"


def test_the_openapi_document_says_every_route_and_schema() -> None:
    doc = create_app(Settings()).openapi()
    paths = {p: set(v) for p, v in doc["paths"].items() if p.startswith("/sessions")}
    assert paths == {
        "/sessions": {"get", "post"},
        "/sessions/{session_id}": {"get"},
        "/sessions/{session_id}/transcript": {"get"},
        "/sessions/{session_id}/events": {"get"},
        "/sessions/{session_id}/messages": {"post"},
        "/sessions/{session_id}/answers": {"post"},
        "/sessions/{session_id}/approvals/{approval_id}": {"post"},
        "/sessions/{session_id}/stop": {"post"},
    }
    schemas = doc["components"]["schemas"]
    bodies = {
        ("/sessions", "post"): "StartSession",
        ("/sessions/{session_id}/messages", "post"): "MessageIn",
        ("/sessions/{session_id}/answers", "post"): "AnswersIn",
        ("/sessions/{session_id}/approvals/{approval_id}", "post"): "DecisionIn",
        ("/sessions/{session_id}/stop", "post"): "StopIn",
    }
    for (path, method), name in bodies.items():
        body = doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{name}"}
    assert {"prompt", "agent", "model", "tools", "options", "output_schema"} <= set(
        schemas["StartSession"]["properties"]
    )
    assert schemas["MessageIn"]["properties"]["content"]["maxLength"] == 100_000
    responses = {
        ("/sessions", "post"): ("201", "SessionStarted"),
        ("/sessions", "get"): ("200", "SessionPage"),
        ("/sessions/{session_id}", "get"): ("200", "SessionView"),
        ("/sessions/{session_id}/transcript", "get"): ("200", "TranscriptPage"),
        ("/sessions/{session_id}/stop", "post"): ("202", "StopAccepted"),
    }
    for (path, method), (status, name) in responses.items():
        content = doc["paths"][path][method]["responses"][status]["content"]["application/json"]
        assert content["schema"] == {"$ref": f"#/components/schemas/{name}"}
    events = doc["paths"]["/sessions/{session_id}/events"]["get"]
    assert "text/event-stream" in events["responses"]["200"]["content"]
    assert {p["name"] for p in events["parameters"]} >= {"Last-Event-ID", "cursor", "session_id"}
    assert {"StreamItem", "StreamEnd", "SessionOptions", "StatusView", "TreeQuestion", "TreeApproval"} <= set(schemas)
    # A pending item names the session of the tree that waits on it.
    assert {"session_id", "ask_id", "question"} <= set(schemas["TreeQuestion"]["properties"])
    assert {"session_id", "approval_id", "digest"} <= set(schemas["TreeApproval"]["properties"])
    for route in doc["paths"].values():
        for op in route.values():
            if any(p.startswith("/sessions") for p in doc["paths"] if doc["paths"][p] is route):
                assert op["security"] == [{"HTTPBearer": []}]
                assert {"401", "403", "422"} <= set(op["responses"])
    # Every reference resolves (the bodies' nested models are in the components too).
    text = json.dumps(doc)
    assert set(re.findall(r"#/components/schemas/([\w.-]+)", text)) <= set(schemas)
    assert "#/$defs/" not in text


def test_the_openapi_document_states_the_installed_version() -> None:
    """The API's version is the distribution's, as pip installed it (the editable install in tests)."""
    from importlib.metadata import version

    info = create_app(Settings()).openapi()["info"]
    assert info["version"] == version("durable-agent-tools")
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", info["version"]), info


def test_keys_come_from_the_environment_and_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [{"key": SECRET, "name": "console", "scopes": ["read"], "agents": ["assistant"]}]
    monkeypatch.setenv("AGENT_TOOLS_SERVICE__API_KEYS", json.dumps(keys))
    monkeypatch.setenv("AGENT_TOOLS_SERVICE__CORS_ORIGINS", '["https://app.example"]')
    service = Settings().service
    assert [(k.name, k.scopes, k.agents) for k in service.api_keys] == [("console", ["read"], ["assistant"])]
    assert service.api_keys[0].key.get_secret_value() == SECRET
    assert service.cors_origins == ["https://app.example"]
    assert SECRET not in repr(service) and SECRET not in str(Settings().model_dump())
    # A key too short to be a secret stops the service at start, named by its name, never shown.
    monkeypatch.setenv("AGENT_TOOLS_SERVICE__API_KEYS", json.dumps([{"key": "short-key", "name": "ci"}, "bare"]))
    with pytest.raises(ConfigurationError) as short:
        create_app(Settings())
    assert "'ci', 'api'" in str(short.value) and "short-key" not in str(short.value) and "bare" not in str(short.value)
    # A refusal of the settings themselves does not show what it refused.
    monkeypatch.setenv("AGENT_TOOLS_SERVICE__API_KEYS", json.dumps([{"key": SECRET, "scopes": "everything"}]))
    with pytest.raises(ValueError) as refused:
        Settings()
    assert SECRET not in str(refused.value)


async def test_refusals_never_echo_or_log_a_key(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(service=ServiceSettings.model_validate({"api_keys": [{"key": SECRET, "scopes": ["read"]}]}))
    app = create_app(settings)
    caplog.set_level(logging.DEBUG)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as http:
        answers = [
            await http.post("/sessions", json={"prompt": "x"}, headers={"Authorization": f"Bearer {SECRET}"}),
            await http.get("/sessions", headers={"Authorization": f"Bearer {SECRET}x"}),
            await http.get("/sessions", headers={"Authorization": f"Token {SECRET}"}),
            await http.get("/sessions"),
        ]
    assert [a.status_code for a in answers] == [403, 401, 401, 401]
    for answer in answers:
        assert SECRET not in answer.text and SECRET not in str(answer.headers)
    assert SECRET not in caplog.text
    closed = create_app(Settings())  # no keys configured: every session route is refused
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=closed), base_url="http://svc") as http:
        refused = await http.get("/sessions", headers={"Authorization": f"Bearer {SECRET}"})
    assert refused.status_code == 401 and "no API keys" in refused.json()["detail"]


def test_serve_binds_to_loopback_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from agent_tools._cli.events import serve

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append(kw))
    monkeypatch.delenv("AGENT_TOOLS_EVENTS__HOST", raising=False)
    serve()
    serve(host="0.0.0.0", port=9000)
    assert [(c["host"], c["port"]) for c in calls] == [("127.0.0.1", 8080), ("0.0.0.0", 9000)]
