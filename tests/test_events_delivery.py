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
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agent_tools._settings import Settings
from agent_tools._store.db import Store
from agent_tools._store.event_tables import (
    add_subscription,
    claim_batch,
    claim_for_event,
    event_id_for,
    get_subscription,
    store_event,
)
from agent_tools.activities._events import deliver_events, subscribe
from agent_tools.contracts._events.contract import (
    SIGNAL_EVENT_ARRIVED,
    DeliverEventsInput,
    EventDelivery,
    EventRecord,
    SessionDelivery,
    SubscribeInput,
    SubscribeOutput,
    Subscription,
)


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


def services_for(store: Store, *, direct: bool = True) -> Any:
    settings = Settings(database_url=store.url)
    settings.events.direct_delivery = direct
    return SimpleNamespace(settings=settings, store=store)


async def subscribe_wait(
    store: Store, project: str, sub: Subscription, client: FakeStarter, *, direct: bool = True
) -> SubscribeOutput:
    """The subscribe activity's work for one wait of acme's ``project``."""
    inp = SubscribeInput(organisation="acme", project=project, subscription=sub)
    return await subscribe(services_for(store, direct=direct), inp, client=client, task_queue="q")


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
    assert client.started == []  # the ingress delivers from the row: no router is started or signalled
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
    # With direct delivery off the router has the wait too (signal-with-start), and the row is kept as well.
    routed = a_wait("s3", "ci", {}, t0)
    out = await subscribe_wait(store, project, routed, client, direct=False)
    assert [s["start_signal_args"] for s in client.started] == [[routed]]
    assert await get_subscription(store, routed.subscription_id) is not None


async def test_a_store_error_fails_the_subscribe_so_that_it_is_retried(store: Store) -> None:
    """No router takes a wait the store did not keep: the activity fails (Temporal retries it), and nothing
    is signalled meanwhile."""
    broken = SimpleNamespace(url=store.url, dialect=store.dialect)

    async def unavailable(fn: Any) -> Any:
        raise ConnectionError("the database went away")

    broken.run = unavailable
    client = FakeStarter()
    inp = SubscribeInput(organisation="acme", project="p", subscription=a_wait("s1", "ci", {}, datetime.now(UTC)))
    services: Any = SimpleNamespace(settings=Settings(database_url=store.url), store=broken)  # a stand-in
    with pytest.raises(ConnectionError):
        await subscribe(services, inp, client=client, task_queue="q")
    assert client.started == []


async def test_a_wait_the_store_cannot_keep_is_refused_with_the_reason(store: Store) -> None:
    """A match nested deeper than the store keeps: the model is told (not retried), where the router used
    to take such a wait alone."""
    project = f"p-{uuid.uuid4().hex[:8]}"
    deep: dict[str, Any] = {"x": 1}
    for _ in range(100):
        deep = {"x": deep}
    sub = a_wait("s1", "ci", deep, datetime.now(UTC))
    client = FakeStarter()
    with pytest.raises(ApplicationError) as refused:
        await subscribe_wait(store, project, sub, client)
    assert refused.value.non_retryable and "nested deeper than 64 levels" in str(refused.value)
    assert client.started == [] and await get_subscription(store, sub.subscription_id) is None


async def test_the_ingress_finds_every_matching_wait_past_one_page(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No router delivers what the ingress's scan leaves out any more: the scan goes page by page until it
    has every live wait of the kind, and a retried POST gets the same claims back."""
    from agent_tools._store import event_tables

    monkeypatch.setattr(event_tables, "DIRECT_SCAN_LIMIT", 3)
    monkeypatch.setattr(event_tables, "_CLAIM_CHUNK", 2)
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC)
    waits = [a_wait(f"s{i}", "ci", {"n": 1} if i % 3 else {"n": 2}, t0) for i in range(10)]
    for sub in waits:
        await add_subscription(store, "acme", project, sub)
    event = an_event(project, "d1", t0 + timedelta(seconds=1), payload={"n": 1})
    await store_event(store, event)
    want = sorted(s.session_id for i, s in enumerate(waits) if i % 3)
    claimed = await claim_for_event(store, event, now=t0)
    assert sorted(c.session_id for c in claimed) == want and len(want) == 6
    again = await claim_for_event(store, event, now=t0)
    assert sorted(c.session_id for c in again) == want
    # Another event finds the waits this one claimed taken, and the others still open.
    other = an_event(project, "d2", t0 + timedelta(seconds=2), payload={"n": 2})
    await store_event(store, other)
    assert sorted(c.session_id for c in await claim_for_event(store, other, now=t0)) == ["s0", "s3", "s6", "s9"]
