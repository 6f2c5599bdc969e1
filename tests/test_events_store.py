"""The events table on SQLite and PostgreSQL: idempotent inserts and the backlog query; the waits kept for the
ingress's direct delivery, their claims and hostile matches."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Connection, update

from agent_tools._boundaries import clean_json
from agent_tools._errors import InvalidInput
from agent_tools._store.db import Store
from agent_tools._store.event_tables import (
    add_subscription,
    claim_batch,
    claim_for_event,
    claim_one,
    count_events,
    event_id_for,
    event_subscriptions,
    find_matching,
    get_event,
    get_subscription,
    store_and_claim,
    store_event,
)
from agent_tools.contracts._events.contract import MAX_PAYLOAD_KEYS, EventRecord, Subscription, match_index_key


def record(project: str, delivery: str, kind: str, payload: dict[str, object], at: datetime) -> EventRecord:
    return EventRecord(
        event_id=event_id_for("acme", project, "gh", delivery),
        kind=kind,
        organisation="acme",
        project=project,
        source="gh",
        delivery_id=delivery,
        received_at=at,
        payload=payload,
    )


async def test_store_is_idempotent_and_backlog_matches(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC).replace(microsecond=0)
    first = await store_event(store, record(project, "d1", "github.check_suite.completed", {"pr": 420}, t0))
    again = await store_event(store, record(project, "d1", "github.check_suite.completed", {"pr": 1}, t0))
    assert first.created and not again.created
    assert again.record.payload == {"pr": 420}  # the first delivery wins
    assert await count_events(store, organisation="acme", project=project) == 1
    # "_" in a kind is not a LIKE wildcard: github.checkXsuite must not be a candidate.
    await store_event(store, record(project, "d2", "github.checkXsuite", {"pr": 420}, t0 + timedelta(seconds=1)))
    await store_event(store, record(project, "d3", "github.check_suite", {"pr": 421}, t0 + timedelta(seconds=2)))
    await store_event(store, record(project, "d4", "github.check_suite", {"pr": 420}, t0 + timedelta(seconds=3)))
    kw = {"organisation": "acme", "project": project, "kind": "github.check_suite", "match": {"pr": 420}}
    found = await find_matching(store, since=t0, **kw)  # type: ignore[arg-type]
    assert found is not None and found.delivery_id == "d1"
    assert found.received_at == t0
    found = await find_matching(store, since=t0, exclude=[first.record.event_id], **kw)  # type: ignore[arg-type]
    assert found is not None and found.delivery_id == "d4"
    assert await find_matching(store, since=t0 + timedelta(seconds=4), **kw) is None  # type: ignore[arg-type]
    other = {**kw, "project": "elsewhere"}
    assert await find_matching(store, since=t0, **other) is None  # type: ignore[arg-type]
    loaded = await get_event(store, first.record.event_id)
    assert loaded is not None and loaded.kind == "github.check_suite.completed"


def wait(
    project: str, session: str, kind: str, match: dict[str, object], since: datetime, **kw: object
) -> Subscription:
    return Subscription(
        subscription_id=f"sub-{project}-{session}",
        session_id=session,
        kind=kind,
        match=match,
        since=since,
        deadline=since + timedelta(minutes=10),
        **kw,  # type: ignore[arg-type]
    )


async def test_the_ingress_claims_the_waits_an_event_matches_once(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC).replace(microsecond=0)
    event = record(project, "d1", "github.check_suite.completed", {"pr": 420}, t0 + timedelta(seconds=5))
    await store_event(store, event)
    waits = [
        wait(project, "s-prefix", "github", {}, t0),
        wait(project, "s-kind", "github.check_suite", {"pr": 420}, t0),
        wait(project, "s-exact", "github.check_suite.completed", {}, t0),
        wait(project, "s-other-pr", "github.check_suite", {"pr": 421}, t0),
        wait(project, "s-segment", "github.check", {}, t0),  # not a segment prefix
        wait(project, "s-later", "github", {}, t0 + timedelta(seconds=6)),  # began after the event
        wait(project, "s-seen", "github", {}, t0, exclude_event_ids=[event.event_id]),
        wait(project, "s-expired", "github", {}, t0 - timedelta(minutes=20)),
    ]
    for sub in waits:
        assert await add_subscription(store, "acme", project, sub)
    assert not await add_subscription(store, "acme", project, waits[0])  # a retried subscribe
    elsewhere = wait("elsewhere", "s-elsewhere", "github", {}, t0)
    await add_subscription(store, "acme", "elsewhere", elsewhere)
    now = t0 + timedelta(seconds=6)
    claimed = await claim_for_event(store, event, now=now)
    assert sorted(c.session_id for c in claimed) == ["s-exact", "s-kind", "s-prefix"]
    # A retried POST of the same event finds the same claims (and signals them again: a session ignores
    # a repeated delivery); another event finds them taken.
    again = await claim_for_event(store, event, now=now)
    assert sorted(c.session_id for c in again) == ["s-exact", "s-kind", "s-prefix"]
    second = record(project, "d2", "github.check_suite.completed", {"pr": 420}, t0 + timedelta(seconds=7))
    # (s-seen had received only the first event before.)
    assert sorted(c.session_id for c in await claim_for_event(store, second, now=now)) == ["s-later", "s-seen"]
    # The router: a claimed wait is dropped, an unclaimed one claimed, one without a row kept.
    keep = await claim_batch(
        store,
        [
            (waits[1].subscription_id, second.event_id),  # claimed by the first event
            (waits[1].subscription_id.replace("s-kind", "s-other-pr"), second.event_id),
            ("sub-without-row", second.event_id),
        ],
        now=now,
    )
    assert keep == {waits[3].subscription_id, "sub-without-row"}
    # The backlog check: the claim it meets, or its own.
    assert await claim_one(store, waits[0].subscription_id, second.event_id, now=now) == event.event_id
    assert await claim_one(store, waits[4].subscription_id, second.event_id, now=now) == second.event_id
    assert await claim_one(store, "sub-without-row", second.event_id, now=now) is None
    row = await get_subscription(store, waits[1].subscription_id)
    assert row is not None and row["claimed_event_id"] == event.event_id


async def test_rows_long_past_their_deadline_are_deleted(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC).replace(microsecond=0)
    old = wait(project, "s-old", "ci", {}, t0 - timedelta(hours=3))
    await add_subscription(store, "acme", project, old)
    await add_subscription(store, "acme", project, wait(project, "s-new", "ci", {}, t0))
    assert await get_subscription(store, old.subscription_id) is None
    assert await get_subscription(store, f"sub-{project}-s-new") is not None


def _deep(levels: int) -> dict[str, object]:
    node: dict[str, object] = {"x": 1}
    for _ in range(levels - 1):
        node = {"x": node}
    return node


@pytest.mark.parametrize(
    ("label", "match"),
    [
        ("NUL and a lone surrogate", {"note": "a\x00b\ud800c", "k\x00": "v"}),
        ("a huge string", {"body": "y" * 1_000_000}),
        ("huge numbers", {"n": 10**300, "f": 1e308, "neg": -(10**40)}),
        ("wrong types", {"list": [1, "2", None, True, {"a": []}], "null": None}),
        ("nested 60 levels", _deep(60)),
        ("a 4,000-digit number", {"n": 10**4000}),
        ("dotted keys, nested matches and list paths", {"a.b": {"c": 1}, "l": [{"id": 2}], "e": {}}),
    ],
)
async def test_hostile_matches_are_kept_and_matched_like_the_router(
    label: str, match: dict[str, object], store: Store
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC).replace(microsecond=0)
    sub = wait(project, "s1", "ci", match, t0)
    await add_subscription(store, "acme", project, sub)
    row = await get_subscription(store, sub.subscription_id)
    assert row is not None, label
    # What the ingress stores of a payload is cleaned the same way: a payload equal to the match, as the
    # ingress keeps it, is matched.
    payload = clean_json(match, max_depth=64)
    event = record(project, "d1", "ci.done", payload, t0 + timedelta(seconds=1))
    stored = await store_event(store, event)
    claimed = await claim_for_event(store, stored.record, now=t0 + timedelta(seconds=1))
    assert [c.session_id for c in claimed] == ["s1"], label


async def test_the_ingress_reads_the_waits_under_the_payloads_keys_and_those_without_one(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC).replace(microsecond=0)
    waits = [
        wait(project, "s-keyed", "ci", {"pr": 420}, t0),
        # Written before revision 0007 (no key): read for every event, as every row was then.
        wait(project, "s-old-row", "ci", {"pr": 420}, t0),
        # A key no payload holds, though the match holds: shows that keyed rows are read by key only.
        wait(project, "s-misfiled", "ci", {"pr": 420}, t0),
        wait(project, "s-list-path", "ci", {"prs.0": 420}, t0),  # no key: may reach into a list
    ]
    for sub in waits:
        await add_subscription(store, "acme", project, sub)
    rows = {w.session_id: await get_subscription(store, w.subscription_id) for w in waits}
    assert rows["s-keyed"] is not None and rows["s-keyed"]["match_key"] == match_index_key({"pr": 420})
    assert rows["s-list-path"] is not None and rows["s-list-path"]["match_key"] is None
    c = event_subscriptions.c

    def rekey(conn: Connection) -> None:
        conn.execute(update(event_subscriptions).where(c.session_id == "s-old-row").values(match_key=None))
        conn.execute(update(event_subscriptions).where(c.session_id == "s-misfiled").values(match_key="0" * 32))

    await store.run(rekey)
    event = record(project, "d1", "ci.done", {"pr": 420, "prs": [420]}, t0 + timedelta(seconds=1))
    claimed = await claim_for_event(store, event, now=t0 + timedelta(seconds=1))
    assert sorted(d.session_id for d in claimed) == ["s-keyed", "s-list-path", "s-old-row"]
    # A payload with more scalars than are looked up by key is matched against every wait of its kind.
    wide = record(
        project,
        "d2",
        "ci.done",
        {"pr": 420, **{f"k{i}": i for i in range(MAX_PAYLOAD_KEYS)}},
        t0 + timedelta(seconds=2),
    )
    assert [d.session_id for d in await claim_for_event(store, wide, now=t0 + timedelta(seconds=2))] == ["s-misfiled"]


async def test_a_match_the_store_cannot_keep_is_refused_and_left_to_the_router(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC)
    with pytest.raises(InvalidInput):
        await add_subscription(store, "acme", project, wait(project, "s1", "ci", _deep(100), t0))
    assert await get_subscription(store, f"sub-{project}-s1") is None


def wait_on(project: str, sub_id: str, match: dict[str, object], since: datetime) -> Subscription:
    return Subscription(
        subscription_id=sub_id,
        session_id=f"s-{sub_id}",
        kind="ci",
        match=match,
        since=since,
        deadline=since + timedelta(minutes=5),
    )


async def test_store_and_claim_claims_once_and_again_for_a_retry(store: Store) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC)
    await add_subscription(store, "acme", project, wait_on(project, f"w-{project}", {"n": 1}, t0))
    first = record(project, "d1", "ci.done", {"n": 1}, t0 + timedelta(seconds=1))
    stored, claimed = await store_and_claim(store, first, size=10, now=t0 + timedelta(seconds=1))
    assert stored.created and [c.session_id for c in claimed] == [f"s-w-{project}"]
    # A retried delivery with another body: the first body is kept and its claim is returned again.
    retry = record(project, "d1", "ci.done", {"n": 2}, t0 + timedelta(seconds=2))
    again, reclaimed = await store_and_claim(store, retry, size=10, now=t0 + timedelta(seconds=2))
    assert not again.created and again.record.payload == {"n": 1} and reclaimed == claimed
    other = record(project, "d2", "ci.done", {"n": 1}, t0 + timedelta(seconds=3))
    assert (await store_and_claim(store, other, size=10, now=t0 + timedelta(seconds=3)))[1] == []
    assert await count_events(store, organisation="acme", project=project) == 2


async def test_store_and_claim_racing_a_subscribe_never_misses_the_wait(store: Store) -> None:
    """Every (event, new wait) pair raced together is seen by the ingress's claim or by the wait's backlog
    check, or both: the guarantee that lets the ingress store and claim in one SQLite transaction."""
    import asyncio

    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC)

    async def subscribe(i: int) -> bool:
        await add_subscription(store, "acme", project, wait_on(project, f"w{i}-{project}", {"n": i}, t0))
        found = await find_matching(store, organisation="acme", project=project, kind="ci", match={"n": i}, since=t0)
        return found is not None

    async def post(i: int) -> bool:
        event = record(project, f"d{i}", "ci.done", {"n": i}, t0 + timedelta(milliseconds=1))
        return bool((await store_and_claim(store, event, size=1, now=t0 + timedelta(milliseconds=1)))[1])

    for i in range(40):
        by_backlog, by_ingress = await asyncio.gather(subscribe(i), post(i))
        assert by_backlog or by_ingress, i
