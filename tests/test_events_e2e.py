"""wait_for_event end to end: real Temporal, the real ingress on a 127.0.0.1 socket, real sessions."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from temporalio.api.enums.v1 import EventType

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._store.db import Store
from agent_tools._store.event_tables import (
    add_subscription,
    count_events,
    event_subscriptions,
)
from agent_tools.contracts._events.contract import (
    SIGNAL_EVENT_ARRIVED,
    SIGNAL_SUBSCRIBE,
    Subscription,
    router_workflow_id,
)
from agent_tools.contracts._events.signatures import sign_standard_webhook
from tests.support.events import (
    HMAC_SECRET,
    TOKEN,
    final_event,
    github_headers,
    ingress,
    loads,
    router_state,
    subscribed,
    wait_script,
)
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually


async def router_started(client: AgentToolsClient, project: str) -> bool:
    """Whether acme's ``project`` has a router at all (with direct delivery nothing starts one)."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await client.temporal.get_workflow_handle(router_workflow_id("acme", project)).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def router_path(settings: Settings, direct: bool) -> None:
    """The worker's side of a path: with ``direct`` off its waits subscribe with the router too."""
    settings.events = settings.events.model_copy(update={"direct_delivery": direct})


async def start_waiting(client: AgentToolsClient, project: str, n: int = 1) -> list[SessionHandle]:
    return [await client.start_session("wait for CI", organisation="acme", project=project) for _ in range(n)]


def arrivals(history_events: list[Any]) -> int:
    """How many ``event_arrived`` signals a session's history holds."""
    return sum(
        1
        for ev in history_events
        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        and ev.workflow_execution_signaled_event_attributes.signal_name == SIGNAL_EVENT_ARRIVED
    )


async def subscription_rows(store: Store, project: str) -> list[dict[str, Any]]:
    """The waits the store keeps for a project (acme's)."""
    t = event_subscriptions
    async with store.engine.connect() as conn:
        rows = await conn.execute(select(t).where(t.c.organisation == "acme", t.c.project == project))
        return [dict(r._mapping) for r in rows]


# direct: the ingress signals the waiting sessions from the store's subscriptions (the default); router:
# direct delivery switched off, every delivery through the EventRouter (the path before it).
PATHS = pytest.mark.parametrize("direct", [True, False], ids=["direct", "router"])


@PATHS
async def test_session_receives_only_the_matching_github_delivery(
    settings: Settings, script: Script, worker_for: WorkerFor, direct: bool
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "github.check_suite", "match": {"pr": 420}, "timeout_seconds": 120})
    router_path(settings, direct)
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, direct_delivery=direct) as (http, store),
    ):
        (handle,) = await start_waiting(client, project)
        await subscribed(client, project, 1)
        assert (await handle.status()).status == SessionStatus.waiting_for_event

        async def send(event: str, payload: dict[str, Any], delivery: str) -> httpx.Response:
            body = json.dumps(payload).encode()
            return await http.post("/v1/webhooks/gh", content=body, headers=github_headers(event, body, delivery))

        # Wrong pr, then wrong kind (check_run is not a check_suite), then the one it waits for.
        assert (await send("check_suite", {"action": "completed", "pr": 421}, "d-1")).status_code == 202
        assert (await send("check_run", {"action": "completed", "pr": 420}, "d-2")).status_code == 202
        await asyncio.sleep(0.3)
        assert (await handle.status()).status == SessionStatus.waiting_for_event
        ok = await send("check_suite", {"action": "completed", "pr": 420, "conclusion": "success"}, "d-3")
        assert ok.status_code == 202, ok.text
        assert ok.json()["kind"] == "github.check_suite.completed"

        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == SessionStatus.completed
        data = final_event(result.final_message)
        assert data["status"] == "received"
        assert data["event"]["event_id"] == ok.json()["event_id"]
        assert data["event"]["payload"] == {"action": "completed", "pr": 420, "conclusion": "success"}
        assert await count_events(store, organisation="acme", project=project) == 3
        if direct:
            # The ingress signalled the session; neither the wait nor the events went to a router.
            assert not await router_started(client, project)
        else:
            # The router matched the same wait, found it claimed by the ingress and did not signal it again.
            view = await router_state(client, project)
            assert view.delivered == 0 and view.subscriptions == [] and view.events_seen == 3
        history = [ev async for ev in handle.workflow.fetch_history_events()]
        assert arrivals(history) == 1
        # The ingress's delivery carried the (small) event, so the session rendered it without reading the
        # store (on either path: the ingress claims the wait before the router looks).
        assert loads(history) == 0
        rows = await subscription_rows(store, project)
        assert [r["claimed_event_id"] for r in rows] == [ok.json()["event_id"]]


@PATHS
async def test_several_sessions_waiting_on_the_same_kind_each_get_it(
    settings: Settings, script: Script, worker_for: WorkerFor, direct: bool
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "ci.build", "match": {"build": {"id": 7}}})
    router_path(settings, direct)
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, direct_delivery=direct) as (http, _store),
    ):
        handles = await start_waiting(client, project, 3)
        await subscribed(client, project, 3)
        body = json.dumps({"type": "build.finished", "data": {"build": {"id": 7, "ok": True}}}).encode()
        ts = int(time.time())
        headers = {
            "webhook-id": "msg-1",
            "webhook-timestamp": str(ts),
            "webhook-signature": sign_standard_webhook(HMAC_SECRET, "msg-1", ts, body),
            "content-type": "application/json",
        }
        resp = await http.post("/v1/webhooks/ci", content=body, headers=headers)
        assert resp.status_code == 202, resp.text
        assert resp.json()["kind"] == "ci.build.finished"
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
        ids = {final_event(r.final_message)["event"]["event_id"] for r in results}
        assert ids == {resp.json()["event_id"]}
        for h in handles:  # once each, whoever delivered
            assert arrivals([ev async for ev in h.workflow.fetch_history_events()]) == 1
        if direct:
            assert not await router_started(client, project)
            return
        # The ingress signalled them all, so the router found every wait claimed and signalled none.
        assert (await router_state(client, project)).delivered == 0
        router = client.temporal.get_workflow_handle(router_workflow_id("acme", project))
        types = [ev.event_type async for ev in router.fetch_history_events()]
        assert EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED not in types


@PATHS
async def test_a_session_that_ended_does_not_hold_back_the_others(
    settings: Settings, script: Script, worker_for: WorkerFor, direct: bool
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "ci.done", "timeout_seconds": 120})
    router_path(settings, direct)
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, direct_delivery=direct) as (http, _store),
    ):
        (handle,) = await start_waiting(client, project)
        await subscribed(client, project, 1)
        # A subscription whose session no longer exists (it ended before the event came).
        now = datetime.now(UTC)
        gone = Subscription(
            subscription_id="sub-gone",
            session_id=f"no-such-session-{uuid.uuid4().hex[:6]}",
            kind="ci.done",
            since=now,
            deadline=now + timedelta(minutes=5),
        )
        if direct:
            # Kept in the store, where the ingress claims it and finds the session gone.
            await add_subscription((await client.transcripts()).store, "acme", project, gone)
            await subscribed(client, project, 2)
        else:
            # The router's alone, as a wait subscribed before the store kept waits.
            router = client.temporal.get_workflow_handle(router_workflow_id("acme", project))
            await router.signal(SIGNAL_SUBSCRIBE, gone)
            await subscribed(client, project, 1)

            async def both() -> bool:
                return len((await router_state(client, project)).subscriptions) == 2

            await eventually(both, timeout=30, interval=0.05, what="two subscriptions in the router")
        resp = await http.post(
            "/v1/events", json={"kind": "ci.done", "payload": {}}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert resp.status_code == 202, resp.text
        result = await asyncio.wait_for(handle.result(), 60)
        assert final_event(result.final_message)["event"]["event_id"] == resp.json()["event_id"]

        if direct:
            rows = {r["subscription_id"]: r for r in await subscription_rows(_store, project)}
            assert rows["sub-gone"]["claimed_event_id"] == resp.json()["event_id"]
            assert not await router_started(client, project)
            return

        async def settled() -> bool:
            view = await router_state(client, project)
            return view.subscriptions == [] and view.events_seen == 1

        await eventually(settled, timeout=30, interval=0.05, what="the router settled")
        # The ended session is not counted: the router delivered to nobody (the live wait was the
        # ingress's, claimed before the router looked).
        assert (await router_state(client, project)).delivered == 0


async def test_event_posted_before_subscription_reaches_router_is_not_missed(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """An event stored after the wait began but routed before the subscription: the backlog check finds it."""
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "deploy", "match": {"env": "prod"}, "timeout_seconds": 60})
    async with worker_for() as client, ingress(settings, client.temporal, project) as (http, _store):
        (handle,) = await start_waiting(client, project)

        async def waiting() -> bool:
            return bool(await handle.query("event_waits", list))

        await eventually(waiting, timeout=30, interval=0.05, what="an event wait in place")
        # Publish at once, racing the subscribe activity; whichever wins, the session gets the event.
        resp = await http.post(
            "/v1/events",
            json={
                "kind": "deploy.done",
                "payload": {"env": "prod"},
                "organisation": "acme",
                "project": project,
            },
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert resp.status_code == 202, resp.text
        result = await asyncio.wait_for(handle.result(), 60)
        assert final_event(result.final_message)["event"]["event_id"] == resp.json()["event_id"]


async def test_large_event_is_saved_as_an_artifact_and_the_model_gets_a_pointer(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "github.push", "timeout_seconds": 60})
    async with worker_for() as client, ingress(settings, client.temporal, project) as (http, _store):
        (handle,) = await start_waiting(client, project)
        await subscribed(client, project, 1)
        payload = {
            "ref": "refs/heads/main",
            "commits": [{"id": f"commit-{i:04d}", "message": "x" * 100} for i in range(50)],
        }
        body = json.dumps(payload).encode()
        resp = await http.post("/v1/webhooks/gh", content=body, headers=github_headers("push", body, "big-1"))
        assert resp.status_code == 202
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.final_message is not None and "[Tool result saved:" in result.final_message
        tool_entries = [e for e in await handle.transcript() if e.role == "tool"]
        assert tool_entries[-1].artifact_ref is not None
        history = await handle.workflow.fetch_history()
        # The payload went to the artifact store, not through the session's history. (The marker cannot occur
        # by chance, unlike a short id that a random request id may contain.)
        assert "commit-0049" not in history.to_json()
        assert loads(list(history.events)) == 1  # too large to ride in the delivery: read from the store


async def test_event_stored_while_temporal_is_unreachable_is_routed_by_the_retry(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """503 when the router cannot be signalled (the event is stored); the sender's retry with the same
    delivery id routes it, and the waiting session gets it once."""
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "ci", "timeout_seconds": 60})
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{sock.getsockname()[1]}"
    unreachable = settings.model_copy(update={"temporal_address": dead})
    body = {"kind": "ci.done", "payload": {"n": 1}, "id": "retry-1"}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with worker_for() as client:
        (handle,) = await start_waiting(client, project)
        await subscribed(client, project, 1)
        async with ingress(unreachable, None, project) as (http, store):
            failed = await http.post("/v1/events", json=body, headers=auth)
            assert failed.status_code == 503 and "retry with the same delivery id" in failed.json()["detail"]
            assert await count_events(store, organisation="acme", project=project) == 1
        async with ingress(settings, client.temporal, project) as (http, store):
            retried = await http.post("/v1/events", json=body, headers=auth)
            assert retried.status_code == 200 and retried.json()["duplicate"] is True
            result = await asyncio.wait_for(handle.result(), 60)
            assert final_event(result.final_message)["event"]["event_id"] == retried.json()["event_id"]
            assert await count_events(store, organisation="acme", project=project) == 1


async def test_event_whose_waits_could_not_be_read_is_delivered_by_the_retry(
    settings: Settings, script: Script, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """503 when the store cannot answer the look-up of the waits (no router would deliver it instead); the
    sender's retry with the same delivery id delivers it, once. On SQLite the event and its claims are one
    transaction, so nothing was stored; elsewhere the event was stored first and the retry is a duplicate."""
    from agent_tools._store import event_tables

    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "ci", "timeout_seconds": 60})
    body = {"kind": "ci.done", "payload": {"n": 1}, "id": "claim-1"}
    auth = {"Authorization": f"Bearer {TOKEN}"}
    claim_for_event = event_tables._claim_for_event

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("the database went away")

    async with worker_for() as client, ingress(settings, client.temporal, project) as (http, store):
        (handle,) = await start_waiting(client, project)
        await subscribed(client, project, 1)
        monkeypatch.setattr(event_tables, "_claim_for_event", unavailable)
        failed = await http.post("/v1/events", json=body, headers=auth)
        assert failed.status_code == 503 and "retry with the same delivery id" in failed.json()["detail"]
        one_transaction = store.dialect == "sqlite"
        assert await count_events(store, organisation="acme", project=project) == (0 if one_transaction else 1)
        assert (await handle.status()).status == SessionStatus.waiting_for_event
        monkeypatch.setattr(event_tables, "_claim_for_event", claim_for_event)
        retried = await http.post("/v1/events", json=body, headers=auth)
        assert retried.status_code == (202 if one_transaction else 200)
        assert retried.json()["duplicate"] is not one_transaction
        result = await asyncio.wait_for(handle.result(), 60)
        assert final_event(result.final_message)["event"]["event_id"] == retried.json()["event_id"]
        assert arrivals([ev async for ev in handle.workflow.fetch_history_events()]) == 1
        assert not await router_started(client, project)


@pytest.mark.parametrize(("worker_direct", "ingress_direct"), [(True, False), (False, True)])
async def test_workers_and_ingress_set_apart_still_deliver_every_event(
    settings: Settings, script: Script, worker_for: WorkerFor, worker_direct: bool, ingress_direct: bool
) -> None:
    """``direct_delivery`` is read by each process from its own environment: a worker and an ingress that
    disagree (a rolling change of the setting) still deliver each event once. The ingress always delivers
    from the store; a router holds only waits that also have a row, or none."""
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "ci.done", "timeout_seconds": 120})
    router_path(settings, worker_direct)
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, direct_delivery=ingress_direct) as (http, store),
    ):
        (handle,) = await start_waiting(client, project)
        await subscribed(client, project, 1)
        resp = await http.post(
            "/v1/events", json={"kind": "ci.done", "payload": {}}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert resp.status_code == 202, resp.text
        result = await asyncio.wait_for(handle.result(), 60)
        assert final_event(result.final_message)["event"]["event_id"] == resp.json()["event_id"]
        assert arrivals([ev async for ev in handle.workflow.fetch_history_events()]) == 1
        rows = await subscription_rows(store, project)
        assert [(r["claimed_event_id"], r["claimed_by"]) for r in rows] == [(resp.json()["event_id"], "ingress")]
        # The router, where one was started, delivered nothing: the ingress had claimed the wait.
        assert await router_started(client, project)
        assert (await router_state(client, project)).delivered == 0
