"""The ingress over a real socket: refusals (forgery, replay, oversize, bad input) store nothing, and a
repeated delivery is stored and routed once."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from agent_tools._settings import Settings
from agent_tools._store.event_tables import count_events
from agent_tools.contracts._events.signatures import sign_github, sign_standard_webhook
from tests.support.events import GH_SECRET, HMAC_SECRET, TOKEN, github_headers, ingress, router_state
from tests.support.fixture_types import WorkerFor


def hmac_headers(body: bytes, msg_id: str, ts: int, secret: str = HMAC_SECRET) -> dict[str, str]:
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": sign_standard_webhook(secret, msg_id, ts, body),
        "content-type": "application/json",
    }


async def test_forged_replayed_and_oversized_deliveries_are_refused_and_nothing_is_stored_twice(
    settings: Settings, worker_for: WorkerFor
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    async with (
        worker_for() as client,
        # Also through the router, whose count of events seen shows what was routed (and what was not).
        ingress(settings, client.temporal, project, max_body_bytes=4096, direct_delivery=False) as (http, store),
    ):

        async def stored() -> int:
            return await count_events(store, organisation="acme", project=project)

        body = json.dumps({"action": "completed", "pr": 420}).encode()
        # Forgery: signed with another secret, or a body changed after signing.
        forged = await http.post(
            "/v1/webhooks/gh",
            content=body,
            headers=github_headers("check_suite", body, "g-1", secret="not-it-123"),
        )
        assert forged.status_code == 401 and "does not match" in forged.json()["detail"]
        tampered = body.replace(b"420", b"421")
        resp = await http.post("/v1/webhooks/gh", content=tampered, headers=github_headers("check_suite", body, "g-1"))
        assert resp.status_code == 401
        unsigned = {k: v for k, v in github_headers("check_suite", body, "g-1").items() if k != "X-Hub-Signature-256"}
        resp = await http.post("/v1/webhooks/gh", content=body, headers=unsigned)
        assert resp.status_code == 401 and "missing" in resp.json()["detail"]
        assert await stored() == 0

        # A genuine delivery, then the same delivery replayed: acknowledged, stored and routed once.
        first = await http.post("/v1/webhooks/gh", content=body, headers=github_headers("check_suite", body, "g-1"))
        assert first.status_code == 202 and first.json()["duplicate"] is False
        again = await http.post("/v1/webhooks/gh", content=body, headers=github_headers("check_suite", body, "g-1"))
        assert again.status_code == 200 and again.json()["duplicate"] is True
        assert again.json()["event_id"] == first.json()["event_id"]
        assert await stored() == 1

        # HMAC source: a replay outside the timestamp window is refused; inside it, the id makes it a no-op.
        hbody = json.dumps({"type": "build.done", "data": {"id": 1}}).encode()
        stale = await http.post(
            "/v1/webhooks/ci", content=hbody, headers=hmac_headers(hbody, "m-1", int(time.time()) - 3600)
        )
        assert stale.status_code == 401 and "window" in stale.json()["detail"]
        now = int(time.time())
        ok = await http.post("/v1/webhooks/ci", content=hbody, headers=hmac_headers(hbody, "m-1", now))
        assert ok.status_code == 202, ok.text
        replay = await http.post("/v1/webhooks/ci", content=hbody, headers=hmac_headers(hbody, "m-1", now))
        assert replay.status_code == 200 and replay.json()["duplicate"] is True
        forged_h = await http.post(
            "/v1/webhooks/ci",
            content=hbody,
            headers=hmac_headers(hbody, "m-2", now, secret="wrong-secret-123"),
        )
        assert forged_h.status_code == 401
        assert await stored() == 2

        # Oversized: refused by its Content-Length, and also when streamed without one (chunked).
        big = json.dumps({"blob": "x" * 5000}).encode()
        resp = await http.post("/v1/webhooks/gh", content=big, headers=github_headers("push", big, "g-big"))
        assert resp.status_code == 413

        async def chunks() -> AsyncIterator[bytes]:
            for i in range(0, len(big), 1000):
                yield big[i : i + 1000]

        resp = await http.post(
            "/v1/events",
            content=chunks(),
            headers={"Authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
        )
        assert resp.status_code == 413
        assert await stored() == 2

        # The router saw each event once (the replays were not routed again).
        view = await router_state(client, project)
        assert view.events_seen == 2


async def test_clear_client_errors(settings: Settings, worker_for: WorkerFor) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    async with worker_for() as client, ingress(settings, client.temporal, project) as (http, store):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        cases: list[tuple[httpx.Response, int, str]] = []
        cases.append((await http.post("/v1/events", json={"kind": "a.b"}), 401, "missing bearer token"))
        cases.append(
            (
                await http.post("/v1/events", json={"kind": "a.b"}, headers={"Authorization": "Bearer nope"}),
                401,
                "invalid",
            )
        )
        cases.append(
            (
                await http.post(
                    "/v1/events",
                    json={"kind": "a.b", "organisation": "acme", "project": "other"},
                    headers=auth,
                ),
                403,
                "not valid",
            )
        )
        cases.append(
            (
                await http.post(
                    "/v1/events", content=b"{not json", headers={**auth, "content-type": "application/json"}
                ),
                400,
                "malformed JSON",
            )
        )
        cases.append((await http.post("/v1/events", json=[1, 2], headers=auth), 400, "JSON object"))
        cases.append((await http.post("/v1/events", json={"kind": "bad kind!"}, headers=auth), 422, "kind"))
        cases.append((await http.post("/v1/webhooks/nope", json={}), 404, "unknown event source"))
        body = b"{broken"
        cases.append(
            (
                await http.post("/v1/webhooks/gh", content=body, headers=github_headers("push", body, "x")),
                400,
                "malformed JSON",
            )
        )
        good = b"{}"
        no_event = {k: v for k, v in github_headers("push", good, "y").items() if k != "X-GitHub-Event"}
        cases.append((await http.post("/v1/webhooks/gh", content=good, headers=no_event), 400, "X-GitHub-Event"))
        hb = json.dumps({"data": {}}).encode()
        cases.append(
            (
                await http.post("/v1/webhooks/ci", content=hb, headers=hmac_headers(hb, "z", int(time.time()))),
                422,
                "type",
            )
        )
        for resp, code, text in cases:
            assert resp.status_code == code, (resp.status_code, resp.text, code)
            assert text in resp.json()["detail"], (resp.text, text)
        assert await count_events(store, organisation="acme", project=project) == 0

        # Generic events: the token's project is the default scope; the delivery id makes a retry a no-op.
        one = await http.post(
            "/v1/events", json={"kind": "deploy.done", "payload": {"v": 1}, "id": "dep-1"}, headers=auth
        )
        two = await http.post(
            "/v1/events",
            json={"kind": "deploy.done", "payload": {"v": 1}},
            headers={**auth, "Idempotency-Key": "dep-1"},
        )
        assert one.status_code == 202 and two.status_code == 200 and one.json()["event_id"] == two.json()["event_id"]
        assert one.json()["organisation"] == "acme" and one.json()["project"] == project
        assert await count_events(store, organisation="acme", project=project) == 1

        spec = (await http.get("/openapi.json")).json()
        post = spec["paths"]["/v1/events"]["post"]
        assert post["requestBody"]["content"]["application/json"]["schema"]["properties"]["kind"]
        assert {"202", "401", "413"} <= set(post["responses"])
        assert "/v1/webhooks/{source}" in spec["paths"]


async def test_github_form_encoded_and_ping(settings: Settings, worker_for: WorkerFor) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    async with worker_for() as client, ingress(settings, client.temporal, project) as (http, _store):
        from urllib.parse import urlencode

        body = urlencode({"payload": json.dumps({"action": "opened", "number": 5})}).encode()
        headers = {
            "X-GitHub-Event": "pull_request",
            "X-GitHub-Delivery": "f-1",
            "X-Hub-Signature-256": sign_github(GH_SECRET, body),
            "content-type": "application/x-www-form-urlencoded",
        }
        resp = await http.post("/v1/webhooks/gh", content=body, headers=headers)
        assert resp.status_code == 202, resp.text
        assert resp.json()["kind"] == "github.pull_request.opened"
        ping = b'{"zen": "Keep it logically awesome."}'
        resp = await http.post("/v1/webhooks/gh", content=ping, headers=github_headers("ping", ping, "f-2"))
        assert resp.status_code == 202 and resp.json()["kind"] == "github.ping"


async def test_cli_events_send_posts_to_the_ingress(settings: Settings, worker_for: WorkerFor) -> None:
    import asyncio

    from typer.testing import CliRunner

    from agent_tools._cli import app

    project = f"p-{uuid.uuid4().hex[:8]}"
    async with worker_for() as client, ingress(settings, client.temporal, project) as (http, store):
        url = str(http.base_url)
        runner = CliRunner()
        args = [
            "events",
            "send",
            "ci.done",
            "--payload",
            '{"n": 1}',
            "--id",
            "cli-1",
            "--url",
            url,
            "--token",
            TOKEN,
        ]
        # The CLI is synchronous; run it in a thread so the server in this event loop can answer.
        result = await asyncio.to_thread(runner.invoke, app, args)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["kind"] == "ci.done"
        refused = await asyncio.to_thread(runner.invoke, app, [*args[:-1], "wrong-token"])
        assert refused.exit_code == 1 and "refused (401)" in refused.output
        bad = await asyncio.to_thread(runner.invoke, app, ["events", "send", "x", "--payload", "[1]", "--url", url])
        assert bad.exit_code != 0
        assert await count_events(store, organisation="acme", project=project) == 1


async def test_serve_command_runs_the_ingress_with_its_own_client_and_store(
    settings: Settings, worker_for: WorkerFor, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """`agent-tools serve` as its own process, configured only by the environment, as in docker-compose."""
    import asyncio
    import os
    import socket
    import subprocess
    import sys

    project = f"p-{uuid.uuid4().hex[:8]}"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_EVENTS__TOKENS": json.dumps({f"acme/{project}": TOKEN}),
        # Through the router as well: its count of events seen shows that this process's client signalled.
        "AGENT_TOOLS_EVENTS__DIRECT_DELIVERY": "false",
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", "from agent_tools._cli import main; main()", "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
    )
    try:
        async with worker_for() as client, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(200):
                try:
                    if (await http.get("/healthz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
            resp = await http.post(
                "/v1/events",
                json={"kind": "ci.done", "payload": {"n": 1}},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert resp.status_code == 202, resp.text
            for _ in range(100):
                try:
                    if (await router_state(client, project)).events_seen == 1:
                        break
                except Exception:
                    pass
                await asyncio.sleep(0.05)
            assert (await router_state(client, project)).events_seen == 1
    finally:
        proc.terminate()
        proc.wait(10)
