"""Every HTTP route with hostile bodies: deep JSON, huge bodies, NUL bytes and lone surrogates, wrong types,
replayed webhooks. Each gets a clear 4xx (never a 500), and nothing unroutable is stored."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._service.app import create_app
from agent_tools._settings import Settings
from agent_tools._store.event_tables import count_events
from agent_tools.contracts._events.contract import Subscription
from agent_tools.contracts._events.signatures import sign_standard_webhook
from tests.support.events import HMAC_SECRET, TOKEN, github_headers, ingress

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _deep(levels: int) -> str:
    return '{"x":' * levels + "1" + "}" * levels


@pytest.mark.parametrize(
    ("label", "body", "status"),
    [
        ("nested 5,000 levels", '{"kind": "ci.done", "payload": ' + _deep(5000) + "}", 400),
        ("nested 300 levels", '{"kind": "ci.done", "payload": ' + _deep(300) + "}", 400),
        ("nested 40 levels", '{"kind": "ci.done", "payload": ' + _deep(40) + "}", 400),
        ("not JSON", "{nope", 400),
        ("not an object", "[1, 2]", 400),
        ("a wrong type", '{"kind": 12}', 422),
        ("a kind with NUL", '{"kind": "ci.\\u0000done"}', 422),
        ("a huge body", '{"kind": "ci.done", "payload": {"x": "' + "y" * 2_000_000 + '"}}', 413),
    ],
)
async def test_events_that_cannot_be_routed_are_refused_and_never_stored(
    label: str, body: str, status: int, settings: Settings, temporal_env: WorkflowEnvironment
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    async with ingress(settings, temporal_env.client, project) as (http, store):
        resp = await http.post(
            "/v1/events", content=body.encode(), headers={**AUTH, "Content-Type": "application/json"}
        )
        assert resp.status_code == status, (label, resp.text[:300])
        assert await count_events(store, organisation="acme", project=project) == 0


async def test_nul_bytes_and_lone_surrogates_in_a_payload_are_stored_cleaned(
    settings: Settings, temporal_env: WorkflowEnvironment, store_url: str
) -> None:
    settings.database_url = store_url
    project = f"p-{uuid.uuid4().hex[:8]}"
    async with ingress(settings, temporal_env.client, project) as (http, store):
        from agent_tools._store.event_tables import add_subscription, get_event, get_subscription

        # A wait whose match holds the same hostile text, as a model could write it: its key is made from
        # the match as stored, which is cleaned the same way, so the cleaned event still finds it.
        now = datetime.now(UTC)
        sub = Subscription(
            subscription_id=f"sub-{project}",
            session_id=f"no-such-session-{project}",  # an ended session is skipped by the delivery
            kind="ci",
            match={"note": "a\x00b\ud800c"},
            since=now - timedelta(seconds=1),
            deadline=now + timedelta(minutes=5),
        )
        await add_subscription(store, "acme", project, sub)
        body = '{"kind": "ci.done", "payload": {"note": "a\\u0000b\\ud800c", "k\\u0000": 1}}'
        resp = await http.post(
            "/v1/events", content=body.encode(), headers={**AUTH, "Content-Type": "application/json"}
        )
        assert resp.status_code == 202, resp.text

        event = await get_event(store, resp.json()["event_id"])
        assert event is not None and event.payload == {"note": "a\ufffdb\ufffdc", "k\ufffd": 1}
        row = await get_subscription(store, sub.subscription_id)
        assert row is not None and row["match_key"] is not None
        assert row["claimed_event_id"] == event.event_id


async def test_a_github_delivery_replayed_under_a_new_delivery_id_is_a_duplicate(
    settings: Settings, temporal_env: WorkflowEnvironment
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    async with ingress(settings, temporal_env.client, project) as (http, store):
        body = json.dumps({"action": "completed", "pr": 7}).encode()
        first = await http.post("/v1/webhooks/gh", content=body, headers=github_headers("check_suite", body, "d-1"))
        # GitHub signs the body only: an attacker who saw one delivery can resend it with any delivery id.
        replay = await http.post("/v1/webhooks/gh", content=body, headers=github_headers("check_suite", body, "d-2"))
        assert first.status_code == 202 and replay.status_code == 200
        assert replay.json()["duplicate"] is True and replay.json()["event_id"] == first.json()["event_id"]
        assert await count_events(store, organisation="acme", project=project) == 1
        deep = ('{"action": "x", "data": ' + _deep(300) + "}").encode()
        refused = await http.post("/v1/webhooks/gh", content=deep, headers=github_headers("check_suite", deep, "d-3"))
        assert refused.status_code == 400


async def test_a_standard_webhook_replay_with_a_new_id_fails_its_signature(
    settings: Settings, temporal_env: WorkflowEnvironment
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    async with ingress(settings, temporal_env.client, project) as (http, store):
        body = json.dumps({"type": "build.done", "data": {"n": 1}}).encode()
        import time

        ts = str(int(time.time()))
        headers = {
            "webhook-id": "w-1",
            "webhook-timestamp": ts,
            "webhook-signature": sign_standard_webhook(HMAC_SECRET, "w-1", int(ts), body),
        }
        assert (await http.post("/v1/webhooks/ci", content=body, headers=headers)).status_code == 202
        assert (await http.post("/v1/webhooks/ci", content=body, headers=headers)).status_code == 200  # same id
        forged = {**headers, "webhook-id": "w-2"}
        assert (await http.post("/v1/webhooks/ci", content=body, headers=forged)).status_code == 401
        assert await count_events(store, organisation="acme", project=project) == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/tools/search", '{"query": ' + _deep(5000).replace("1", '"q"') + "}"),
        ("/v1/tools/fetch", '{"url": ' + _deep(5000) + "}"),
        ("/v1/research", '{"question": ' + _deep(5000) + "}"),
        ("/v1/tools/search", '{"query": "' + "q" * 2_000_000 + '"}'),
        ("/v1/tools/search", '{"query": "a\\u0000b", "max_results": 100000000000000000000000000000}'),
        ("/v1/tools/fetch", '{"url": 12}'),
        ("/v1/tools/fetch", "not json"),
    ],
)
async def test_tool_endpoints_refuse_hostile_bodies_with_400(path: str, body: str, settings: Settings) -> None:
    app = create_app(settings, api_keys=["k"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as http:
        resp = await http.post(
            path, content=body.encode(), headers={"Authorization": "Bearer k", "Content-Type": "application/json"}
        )
    assert resp.status_code == 400, resp.text[:300]
    assert resp.json()["error"]["code"] == "bad_request"
    assert "X-RateLimit-Remaining" in resp.headers
