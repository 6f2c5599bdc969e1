"""Pure rules of the events capability: kind prefixes, nested matches, arguments, signatures, settings."""

from __future__ import annotations

import base64
import time
from typing import Any

import pytest
from pydantic import ValidationError

from agent_tools._catalog.registry import ToolCatalog
from agent_tools.contracts._events.contract import (
    EventWaitState,
    Subscription,
    WaitForEventArgs,
    github_kind,
    json_equal,
    kind_matches,
    payload_matches,
    router_workflow_id,
    subscription_matches,
)
from agent_tools.contracts._events.signatures import (
    SignatureError,
    sign_github,
    sign_standard_webhook,
    verify_github,
    verify_standard_webhook,
)

PR_PAYLOAD: dict[str, Any] = {
    "action": "completed",
    "pr": 420,
    "pull_request": {"number": 420, "head": {"sha": "abc"}, "labels": [{"name": "ci"}, {"name": "urgent"}]},
    "check_suite": {"conclusion": "success", "pull_requests": [{"number": 7}, {"number": 420}]},
    "a.b": {"c": 1},
    "flag": True,
    "count": 1,
}


@pytest.mark.parametrize(
    ("prefix", "kind", "expected"),
    [
        ("github.check_suite", "github.check_suite", True),
        ("github.check_suite", "github.check_suite.completed", True),
        ("github", "github.push", True),
        ("github.check", "github.check_suite", False),
        ("github.check_suite", "github.check_run.completed", False),
        ("github.check_suite.completed", "github.check_suite", False),
    ],
)
def test_kind_is_a_prefix_on_whole_segments(prefix: str, kind: str, expected: bool) -> None:
    assert kind_matches(prefix, kind) is expected


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (None, True),
        ({}, True),
        ({"pr": 420}, True),
        ({"pr": 421}, False),
        ({"pr": "420"}, False),  # no coercion
        ({"pull_request.number": 420}, True),
        ({"pull_request": {"number": 420}}, True),  # nested dict == dotted path
        ({"pull_request": {"number": 420, "head.sha": "abc"}}, True),
        ({"pull_request": {"number": 421}}, False),
        ({"pull_request.labels.1.name": "urgent"}, True),
        ({"pull_request.labels.-1.name": "urgent"}, True),
        ({"pull_request.labels.5.name": "urgent"}, False),
        ({"pull_request.labels.*.name": "ci"}, True),
        ({"check_suite.pull_requests.*.number": 420}, True),
        ({"check_suite.pull_requests.*.number": 421}, False),
        ({"a.b.c": 1}, True),  # a key that literally contains a dot
        ({"flag": 1}, False),  # bool is not a number
        ({"count": True}, False),
        ({"count": 1.0}, True),
        ({"missing": None}, False),  # absent is not null
        ({"pr": 420, "action": "requested"}, False),  # every field must match
        ({"pull_request.labels": [{"name": "ci"}, {"name": "urgent"}]}, True),
    ],
)
def test_payload_match(match: dict[str, Any] | None, expected: bool) -> None:
    assert payload_matches(PR_PAYLOAD, match) is expected


def test_json_equal_is_strict() -> None:
    assert json_equal({"a": [1, "x"]}, {"a": [1, "x"]})
    assert not json_equal({"a": 1, "b": 2}, {"a": 1})
    assert not json_equal(None, 0)
    assert not json_equal([1], [1, 2])


def test_subscription_excludes_events_already_received() -> None:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    sub = Subscription(
        subscription_id="s",
        session_id="x",
        kind="ci",
        match={"n": 1},
        since=now,
        deadline=now,
        exclude_event_ids=["e1"],
    )
    assert subscription_matches(sub, "ci.done", {"n": 1}, "e2")
    assert not subscription_matches(sub, "ci.done", {"n": 1}, "e1")
    assert not subscription_matches(sub, "cid.done", {"n": 1}, "e2")


def test_args_defaults_cap_and_validation() -> None:
    args = WaitForEventArgs(kind="github.check_suite")
    assert args.timeout_seconds == 900 and args.match is None
    assert WaitForEventArgs(kind="x", timeout_seconds=10_000).timeout_seconds == 3300
    with pytest.raises(ValidationError):
        WaitForEventArgs(kind="x", timeout_seconds=0)
    with pytest.raises(ValidationError):
        WaitForEventArgs(kind="has space")
    spec = ToolCatalog.builtin().get("wait_for_event")
    assert spec is not None and spec.runs_in == "workflow"
    schema = spec.parameters_schema()
    assert schema["required"] == ["kind"]
    assert schema["properties"]["timeout_seconds"]["maximum"] == 3300
    assert schema["properties"]["timeout_seconds"]["default"] == 900


def test_wait_state_remembers_a_bounded_list() -> None:
    state = EventWaitState()
    for i in range(80):
        state.remember(f"e{i}")
    state.remember("e79")
    assert len(state.delivered_event_ids) == 50 and state.delivered_event_ids[-1] == "e79"


def test_github_kind_and_router_id() -> None:
    assert github_kind("check_suite", {"action": "completed"}) == "github.check_suite.completed"
    assert github_kind("push", {"ref": "main"}) == "github.push"
    assert router_workflow_id("a/b", "c") != router_workflow_id("a", "b/c")


def test_github_signature() -> None:
    body = b'{"zen": "x"}'
    header = sign_github("secret-123", body)
    verify_github("secret-123", body, header)
    for bad in (None, "", "sha1=abc", sign_github("other-secret", body)):
        with pytest.raises(SignatureError):
            verify_github("secret-123", body, bad)
    with pytest.raises(SignatureError):
        verify_github("secret-123", body + b" ", header)


def test_standard_webhook_signature_window_and_rotation() -> None:
    secret = "whsec_" + base64.b64encode(b"0123456789abcdef").decode()
    body = b'{"type": "a", "data": {}}'
    now = int(time.time())
    sig = sign_standard_webhook(secret, "m1", now, body)
    kwargs: dict[str, Any] = {"msg_id": "m1", "timestamp": str(now), "now": now, "tolerance_seconds": 300}
    assert verify_standard_webhook(secret, body, signature=sig, **kwargs) == now
    assert verify_standard_webhook(secret, body, signature=f"v1,AAAA {sig}", **kwargs) == now  # key rotation
    with pytest.raises(SignatureError, match="window"):
        verify_standard_webhook(secret, body, signature=sig, **{**kwargs, "now": now + 301})
    with pytest.raises(SignatureError, match="does not match"):
        verify_standard_webhook(secret, body, signature=sig, **{**kwargs, "msg_id": "m2"})
    with pytest.raises(SignatureError, match="integer"):
        verify_standard_webhook(secret, body, signature=sig, **{**kwargs, "timestamp": "soon"})
