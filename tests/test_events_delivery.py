"""The router's delivery activity: every session of a batch signalled, an ended one skipped, any other
failure the server may get over retried (the retry signals the batch again; a session ignores a repeated
delivery), one it refuses for good skipped; with the store, a wait the ingress delivered to is skipped, and
the subscribe activity keeps the wait and takes the claim it meets."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from agent_tools.activities.events import deliver_events, subscribe
from agent_tools.activities.store.db import Store
from agent_tools.activities.store.event_tables import (
    add_subscription,
    claim_batch,
    claim_for_event,
    event_id_for,
    get_subscription,
    store_event,
)
from agent_tools.contracts.events import (
    SIGNAL_EVENT_ARRIVED,
    DeliverEventsInput,
    EventDelivery,
    EventRecord,
    SessionDelivery,
    SubscribeInput,
    SubscribeOutput,
    Subscription,
)
from agent_tools.settings import Settings


class FakeHandle:
    def __init__(self, client: FakeClient, session_id: str) -> None:
        self.client, self.session_id = client, session_id

    async def signal(self, name: str, arg: Any) -> None:
        failure = self.client.failures.get(self.session_id)
        if failure is not None:
            raise RPCError("refused", failure, b"")
        self.client.sent.append((self.session_id, name, arg))


class FakeClient:
    def __init__(self, failures: dict[str, RPCStatusCode] | None = None) -> None:
        self.failures = failures or {}
        self.sent: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, workflow_id: str) -> FakeHandle:
        return FakeHandle(self, workflow_id)


def batch(*session_ids: str) -> DeliverEventsInput:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    return DeliverEventsInput(
        deliveries=[
            SessionDelivery(
                session_id=s,
                delivery=EventDelivery(subscription_id=f"sub-{s}", event_id="evt-1", kind="k", received_at=at),
            )
            for s in session_ids
        ]
    )


async def test_every_session_of_the_batch_is_signalled_and_an_ended_one_is_skipped() -> None:
    client = FakeClient({"s2": RPCStatusCode.NOT_FOUND})
    out = await deliver_events(batch("s1", "s2", "s3"), client=client)
    assert (out.delivered, out.gone) == (2, 1)
    assert sorted((s, name, arg.subscription_id) for s, name, arg in client.sent) == [
        ("s1", SIGNAL_EVENT_ARRIVED, "sub-s1"),
        ("s3", SIGNAL_EVENT_ARRIVED, "sub-s3"),
    ]


async def test_any_other_failure_fails_the_activity_so_that_it_is_retried() -> None:
    client = FakeClient({"s2": RPCStatusCode.UNAVAILABLE})
    with pytest.raises(RPCError):
        await deliver_events(batch("s1", "s2"), client=client)


@pytest.mark.parametrize("status", [RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.FAILED_PRECONDITION])
async def test_a_signal_the_server_refuses_is_skipped_not_retried_for_ever(status: RPCStatusCode) -> None:
    # Retried, it would get the same answer every time and hold the whole batch, and the router with it.
    client = FakeClient({"s1": status})
    out = await deliver_events(batch("s1", "s2"), client=client)
    assert (out.delivered, out.gone) == (1, 1)
    assert [s for s, _, _ in client.sent] == ["s2"]


# ---- with the store's claims (the ingress's direct delivery) --------------------------------------------


class FakeStarter(FakeClient):
    """Also takes the subscribe activity's signal-with-start of the router."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[dict[str, Any]] = []

    async def start_workflow(self, workflow: str, arg: Any, **kw: Any) -> None:
        self.started.append({"workflow": workflow, **kw})


def services_for(store: Store) -> Any:
    return SimpleNamespace(settings=Settings(database_url=store.url), store=store)


async def subscribe_wait(store: Store, project: str, sub: Subscription, client: FakeStarter) -> SubscribeOutput:
    """The subscribe activity's work for one wait of acme's ``project``."""
    inp = SubscribeInput(organisation="acme", project=project, subscription=sub)
    return await subscribe(services_for(store), inp, client=client, task_queue="q")


def a_wait(session: str, kind: str, match: dict[str, Any], since: datetime) -> Subscription:
    return Subscription(
        subscription_id=f"sub-{uuid.uuid4().hex[:8]}",
        session_id=session,
        kind=kind,
        match=match,
        since=since,
        deadline=since + timedelta(minutes=10),
    )


def an_event(project: str, delivery: str, at: datetime, payload: dict[str, Any] | None = None) -> EventRecord:
    return EventRecord(
        event_id=event_id_for("acme", project, "api", delivery),
        kind="ci.done",
        organisation="acme",
        project=project,
        source="api",
        delivery_id=delivery,
        received_at=at,
        payload=payload or {},
    )


async def test_the_router_skips_a_wait_the_ingress_delivered_and_signals_the_rest(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC)
    direct, fresh = a_wait("s1", "ci", {}, t0), a_wait("s2", "ci", {}, t0)
    await add_subscription(store, "acme", project, direct)
    event = an_event(project, "d1", t0 + timedelta(seconds=1))
    await store_event(store, event)
    assert [c.session_id for c in await claim_for_event(store, event, now=t0)] == ["s1"]
    await add_subscription(store, "acme", project, fresh)  # began after the ingress looked
    client = FakeClient()
    deliveries = DeliverEventsInput(
        deliveries=[
            SessionDelivery(
                session_id=sub.session_id,
                delivery=EventDelivery(
                    subscription_id=sub.subscription_id, event_id=event.event_id, kind="ci.done", received_at=t0
                ),
            )
            for sub in (direct, fresh)
        ]
        + batch("legacy").deliveries  # a wait with no row: subscribed before the store kept waits
    )
    out = await deliver_events(deliveries, client=client, store=store)
    assert (out.delivered, out.gone, out.claimed_elsewhere) == (2, 0, 1)
    assert sorted(s for s, _, _ in client.sent) == ["legacy", "s2"]
    # A retry of the same batch (the activity failed after some signals): the router's own claims stand.
    again = FakeClient()
    out = await deliver_events(deliveries, client=again, store=store)
    assert sorted(s for s, _, _ in again.sent) == ["legacy", "s2"]


async def test_subscribe_keeps_the_wait_and_takes_what_the_ingress_claimed(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC)
    early = an_event(project, "d1", t0 + timedelta(seconds=1))
    await store_event(store, early)
    sub = a_wait("s1", "ci", {}, t0)
    client = FakeStarter()
    out = await subscribe_wait(store, project, sub, client)
    assert out.backlog is not None and out.backlog.event_id == early.event_id
    assert client.started and client.started[0]["start_signal_args"] == [sub]  # the router has it too
    row = await get_subscription(store, sub.subscription_id)
    assert row is not None and row["claimed_event_id"] == early.event_id
    # A retried subscribe of a wait the ingress had claimed for another event takes that event.
    other = a_wait("s2", "ci", {}, t0)
    await add_subscription(store, "acme", project, other)
    late = an_event(project, "d2", t0 + timedelta(seconds=2))
    await store_event(store, late)
    await claim_batch(store, [(other.subscription_id, late.event_id)], now=t0)
    out = await subscribe_wait(store, project, other, client)
    assert out.backlog is not None and out.backlog.event_id == late.event_id


async def test_a_wait_the_store_cannot_keep_is_left_to_the_router(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    deep: dict[str, Any] = {"x": 1}
    for _ in range(100):
        deep = {"x": deep}
    sub = a_wait("s1", "ci", deep, datetime.now(UTC))
    client = FakeStarter()
    out = await subscribe_wait(store, project, sub, client)
    assert out.backlog is None and len(client.started) == 1
    assert await get_subscription(store, sub.subscription_id) is None
