"""The events table: every event the ingress accepted, stored before it is acknowledged.

The primary key is derived from (organisation, project, source, delivery id), so a sender's retry or a
replayed delivery lands on the same row: nothing is stored twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import JSON, Column, Connection, DateTime, Index, Integer, String, Table, delete, or_, select, update

from agent_tools._boundaries import clean_json, clean_text
from agent_tools._store.base import Database, upsert_rows
from agent_tools._store.tables import metadata
from agent_tools._store.utc import as_utc
from agent_tools.contracts._events.contract import (
    EventRecord,
    Subscription,
    kind_matches,
    match_index_key,
    payload_index_keys,
    payload_matches,
)

events = Table(
    "events",
    metadata,
    Column("event_id", String(64), primary_key=True),
    Column("organisation", String(100), nullable=False),
    Column("project", String(100), nullable=False),
    Column("source", String(100), nullable=False),
    Column("delivery_id", String(200), nullable=False),
    Column("kind", String(200), nullable=False),
    Column("payload", JSON, nullable=False),
    Column("size", Integer, nullable=False, default=0),
    Column("received_at", DateTime(timezone=True), nullable=False),
    Index("ix_events_scope_time", "organisation", "project", "received_at"),
)


def event_id_for(organisation: str, project: str, source: str, delivery_id: str) -> str:
    """Deterministic id: the same delivery from the same source is the same event."""
    return "evt_" + uuid.uuid5(uuid.NAMESPACE_URL, f"events:{organisation}/{project}/{source}/{delivery_id}").hex


def _record(row: Any) -> EventRecord:
    return EventRecord(
        event_id=row.event_id,
        kind=row.kind,
        organisation=row.organisation,
        project=row.project,
        source=row.source,
        delivery_id=row.delivery_id,
        received_at=as_utc(row.received_at),
        payload=row.payload or {},
    )


@dataclass(frozen=True)
class StoredEvent:
    record: EventRecord
    created: bool


async def store_event(store: Database, record: EventRecord, *, size: int = 0) -> StoredEvent:
    """Insert the event unless its id exists; returns the stored row (the first one on a duplicate).

    One transaction through ``Database.run`` (on a SQLite file, one trip to a worker thread), as are the
    reads below: the ingress and the woken sessions' ``load_event`` make them under a burst."""
    row = _event_row(record, size)
    return await store.run(lambda conn: _write_event(conn, record, row))


def _event_row(record: EventRecord, size: int) -> dict[str, Any]:
    return {
        "event_id": record.event_id,
        "organisation": record.organisation,
        "project": record.project,
        "source": record.source,
        "delivery_id": record.delivery_id,
        "kind": record.kind,
        "payload": clean_json(record.payload, max_depth=64),
        "size": size,
        "received_at": as_utc(record.received_at),
    }


def _write_event(conn: Connection, record: EventRecord, row: dict[str, Any]) -> StoredEvent:
    if upsert_rows(conn, events, [row], keys=["event_id"]):
        return StoredEvent(record=record, created=True)
    stored = conn.execute(select(events).where(events.c.event_id == record.event_id)).one()
    return StoredEvent(record=_record(stored), created=False)


async def store_and_claim(
    store: Database, record: EventRecord, *, size: int, now: datetime
) -> tuple[StoredEvent, list[ClaimedDelivery]]:
    """``store_event`` then ``claim_for_event`` on the stored record: the ingress's two writes per event.

    On SQLite in one transaction (one trip to a worker thread, one commit): writers take the file's lock one
    at a time and a transaction's reads start at its first write, so a wait whose row is committed after
    this transaction still finds the event in its backlog check. Elsewhere (PostgreSQL reads each statement
    at its start, before this transaction commits) the event is committed before the waits are read.
    """
    if store.dialect == "sqlite":
        row = _event_row(record, size)

        def both(conn: Connection) -> tuple[StoredEvent, list[ClaimedDelivery]]:
            stored = _write_event(conn, record, row)
            return stored, _claim_for_event(conn, stored.record, now)

        return await store.run(both)
    stored = await store_event(store, record, size=size)
    return stored, await claim_for_event(store, stored.record, now=now)


async def get_event(store: Database, event_id: str) -> EventRecord | None:
    def read(conn: Connection) -> EventRecord | None:
        row = conn.execute(select(events).where(events.c.event_id == event_id)).one_or_none()
        return _record(row) if row is not None else None

    return await store.run(read)


async def count_events(store: Database, *, organisation: str, project: str) -> int:
    from sqlalchemy import func

    stmt = (
        select(func.count())
        .select_from(events)
        .where(events.c.organisation == organisation, events.c.project == project)
    )
    return int(await store.run(lambda conn: conn.execute(stmt).scalar_one()))


async def count_open_waits(store: Database, *, organisation: str, project: str) -> int:
    """Waits of the project that no event has claimed yet (a delivered one keeps its row, claimed, until an
    hour past its deadline)."""
    from sqlalchemy import func

    c = event_subscriptions.c
    stmt = select(func.count()).where(
        c.organisation == organisation, c.project == project, c.claimed_event_id.is_(None)
    )
    return int(await store.run(lambda conn: conn.execute(stmt).scalar_one()))


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ".%"


async def find_matching(
    store: Database,
    *,
    organisation: str,
    project: str,
    kind: str,
    match: dict[str, Any] | None,
    since: datetime,
    exclude: Sequence[str] = (),
    limit: int = 500,
) -> EventRecord | None:
    """The earliest stored event of the scope received at or after ``since`` that the wait would match."""
    cond = (events.c.kind == kind) | events.c.kind.like(_like_prefix(kind), escape="\\")
    stmt = (
        select(events)
        .where(
            events.c.organisation == organisation,
            events.c.project == project,
            events.c.received_at >= as_utc(since),
            cond,
        )
        .order_by(events.c.received_at)
        .limit(limit)
    )
    rows = await store.run(lambda conn: conn.execute(stmt).all())
    for row in rows:
        if row.event_id in exclude or not kind_matches(kind, row.kind):
            continue
        if payload_matches(row.payload or {}, match):
            return _record(row)
    return None


# ---- subscriptions: the ingress's direct delivery --------------------------------------------------------
#
# Every wait is also kept here (the subscribe activity writes it before it signals the router), so that the
# ingress can signal the waiting sessions itself, right after it stored the event, instead of through the
# router's history, its workflow task and its delivery activity on a worker. A row is claimed by the first
# event delivered to it (``claimed_event_id``), by whoever delivers it: the ingress, the subscribe activity's
# backlog check, or the router; the others skip it. The router still receives every event and every
# subscription: it delivers what has no row (a wait subscribed before this table existed, or whose row
# could not be written) and what nobody claimed.

event_subscriptions = Table(
    "event_subscriptions",
    metadata,
    Column("subscription_id", String(64), primary_key=True),
    Column("organisation", String(100), nullable=False),
    Column("project", String(100), nullable=False),
    Column("session_id", String(200), nullable=False),
    Column("kind", String(200), nullable=False),
    Column("match", JSON, nullable=False),
    Column("exclude_event_ids", JSON, nullable=False),
    Column("since", DateTime(timezone=True), nullable=False),
    Column("deadline", DateTime(timezone=True), nullable=False),
    Column("claimed_event_id", String(64), nullable=True),
    Column("claimed_at", DateTime(timezone=True), nullable=True),
    # Who claimed it: "ingress", "backlog" or "router" (a retried router delivery re-signals its own claims).
    Column("claimed_by", String(16), nullable=True),
    # One (path, value) pair of the match, hashed (``match_index_key``): an event reads the waits under its
    # payload's keys and those without one, not every wait of its kind. Null for a match with no such pair
    # and for rows written before revision 0007 (read for every event, as all rows were then).
    Column("match_key", String(32), nullable=True),
    Index("ix_event_subscriptions_scope_kind", "organisation", "project", "kind"),
    Index("ix_event_subscriptions_scope_match", "organisation", "project", "match_key"),
    Index("ix_event_subscriptions_deadline", "deadline"),
)

# A row outlives its deadline by this much before it is deleted: long enough that the router, which drops a
# subscription at its deadline, can never meet a claimed row gone missing (it would deliver a second time).
SUBSCRIPTION_RETENTION = timedelta(hours=1)
# The ingress reads the live subscriptions an event may match this many at a time.
DIRECT_SCAN_LIMIT = 5000
_CLAIM_CHUNK = 1000


@dataclass(frozen=True)
class ClaimedDelivery:
    """A subscription the caller claimed for an event (or had claimed before: a retried delivery)."""

    subscription_id: str
    session_id: str


def kind_prefixes(kind: str) -> list[str]:
    """Every kind a wait may name to match ``kind`` (``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``)."""
    parts = kind.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def subscription_row(organisation: str, project: str, sub: Subscription) -> dict[str, Any]:
    """The row of one wait. Raises InvalidInput for a match nested deeper than the store keeps."""
    match = clean_json(sub.match, max_depth=64)
    return {
        "subscription_id": sub.subscription_id,
        "organisation": organisation,
        "project": project,
        "session_id": sub.session_id,
        "kind": sub.kind,
        "match": match,
        # From the match as stored: the ingress matches that against the payload as stored.
        "match_key": match_index_key(match if isinstance(match, dict) else None),
        "exclude_event_ids": [clean_text(str(e)) for e in sub.exclude_event_ids],
        "since": as_utc(sub.since),
        "deadline": as_utc(sub.deadline),
        "claimed_event_id": None,
        "claimed_at": None,
        "claimed_by": None,
    }


async def add_subscription(store: Database, organisation: str, project: str, sub: Subscription) -> bool:
    """Keep a wait for the ingress (idempotent: a retried subscribe keeps the first row and its claim), and
    delete the rows long past their deadline. True when the row is new."""
    row = subscription_row(organisation, project, sub)
    cutoff = as_utc(sub.since) - SUBSCRIPTION_RETENTION

    def write(conn: Connection) -> bool:
        created = bool(upsert_rows(conn, event_subscriptions, [row], keys=["subscription_id"]))
        conn.execute(delete(event_subscriptions).where(event_subscriptions.c.deadline < cutoff))
        return created

    return await store.run(write)


def _claim(conn: Connection, ids: Sequence[str], event_id: str, now: datetime, by: str, *, own: bool) -> set[str]:
    """Claim the unclaimed rows among ``ids`` for ``event_id``; returns the ids now claimed for it, by
    anyone, or with ``own`` by ``by`` only (the claims of an earlier attempt included)."""
    c = event_subscriptions.c
    won: set[str] = set()
    for at in range(0, len(ids), _CLAIM_CHUNK):  # bound parameters per statement (SQLite's limit)
        chunk = list(ids[at : at + _CLAIM_CHUNK])
        conn.execute(
            update(event_subscriptions)
            .where(c.subscription_id.in_(chunk), c.claimed_event_id.is_(None))
            .values(claimed_event_id=event_id, claimed_at=as_utc(now), claimed_by=by)
        )
        cond = [c.subscription_id.in_(chunk), c.claimed_event_id == event_id]
        if own:
            cond.append(c.claimed_by == by)
        won |= {r.subscription_id for r in conn.execute(select(c.subscription_id).where(*cond)).all()}
    return won


async def claim_for_event(store: Database, record: EventRecord, *, now: datetime) -> list[ClaimedDelivery]:
    """The live waits of the event's scope that it matches, claimed for it in one transaction.

    A wait matches when its kind is a segment prefix of the event's, its match holds on the payload, it has
    not received this event before, it began at or before the event was received (the subscribe activity's
    backlog check finds the events received after a wait began: between the two, every pair is seen by at
    least one side), its deadline has not passed, and no other event claimed it. Rows this event claimed
    before are returned again: a retried POST re-signals them (a session ignores a repeated delivery).
    Only the waits under the payload's match keys and those without a key are read (``match_index_key``).
    """
    return await store.run(lambda conn: _claim_for_event(conn, record, now))


def _claim_for_event(conn: Connection, record: EventRecord, now: datetime) -> list[ClaimedDelivery]:
    c = event_subscriptions.c
    received = as_utc(record.received_at)
    live = [
        c.organisation == record.organisation,
        c.project == record.project,
        c.kind.in_(kind_prefixes(record.kind)),
        c.deadline > as_utc(now),
        c.since <= received,
        or_(c.claimed_event_id.is_(None), c.claimed_event_id == record.event_id),
    ]
    columns = (c.subscription_id, c.session_id, c.match, c.exclude_event_ids)
    keys = payload_index_keys(record.payload)
    # The waits without a key, then those under each of the payload's keys (or, for a payload with too many
    # scalars to look up, every wait of the kind).
    if keys is None:
        narrowings: list[Any] = [None]
    else:
        ordered = sorted(keys)
        narrowings = [c.match_key.is_(None)] + [
            c.match_key.in_(ordered[at : at + _CLAIM_CHUNK]) for at in range(0, len(ordered), _CLAIM_CHUNK)
        ]

    wanted: dict[str, str] = {}
    for narrowing in narrowings:
        where = live if narrowing is None else [*live, narrowing]
        after: str | None = None
        # Page by page in key order: every matching wait is found, however many wait on one kind (no
        # router delivers the rest any more), and a page's rows stay bounded.
        while True:
            page = select(*columns).where(*where).order_by(c.subscription_id).limit(DIRECT_SCAN_LIMIT)
            if after is not None:
                page = page.where(c.subscription_id > after)
            rows = conn.execute(page).all()
            for row in rows:
                if record.event_id in (row.exclude_event_ids or ()):
                    continue
                if payload_matches(record.payload, row.match or {}):
                    wanted[row.subscription_id] = row.session_id
            if len(rows) < DIRECT_SCAN_LIMIT:
                break
            after = rows[-1].subscription_id
    won = _claim(conn, list(wanted), record.event_id, now, "ingress", own=False)
    return [ClaimedDelivery(subscription_id=s, session_id=wanted[s]) for s in wanted if s in won]


async def claim_one(store: Database, subscription_id: str, event_id: str, *, now: datetime) -> str | None:
    """Claim one wait for ``event_id`` unless another event has; returns the event that holds the claim
    (None when the wait has no row)."""

    def claim(conn: Connection) -> str | None:
        _claim(conn, [subscription_id], event_id, now, "backlog", own=False)
        c = event_subscriptions.c
        held: str | None = conn.execute(
            select(c.claimed_event_id).where(c.subscription_id == subscription_id)
        ).scalar_one_or_none()
        return held

    return await store.run(claim)


async def claim_batch(store: Database, pairs: Sequence[tuple[str, str]], *, now: datetime) -> set[str]:
    """The router's side: of (subscription id, event id) pairs, the subscriptions it should still signal.

    A pair is kept when its wait has no row (subscribed before this table, or its row could not be
    written) or when the router claims it now or claimed it before (a retried delivery: it signals its own
    claims again); a wait claimed by the ingress, by the backlog check or for another event is dropped, as
    its delivery went out already.
    """
    if not pairs:
        return set()

    def claim(conn: Connection) -> set[str]:
        c = event_subscriptions.c
        ids = [s for s, _ in pairs]
        known = {
            r.subscription_id: r.claimed_event_id
            for r in conn.execute(select(c.subscription_id, c.claimed_event_id).where(c.subscription_id.in_(ids)))
        }
        keep = {s for s, _ in pairs if s not in known}
        by_event: dict[str, list[str]] = {}
        for s, e in pairs:
            if s in known and known[s] in (None, e):
                by_event.setdefault(e, []).append(s)
        for event_id, subs in by_event.items():
            keep |= _claim(conn, subs, event_id, now, "router", own=True)
        return keep

    return await store.run(claim)


async def get_subscription(store: Database, subscription_id: str) -> dict[str, Any] | None:
    stmt = select(event_subscriptions).where(event_subscriptions.c.subscription_id == subscription_id)
    row = await store.run(lambda conn: conn.execute(stmt).one_or_none())
    return dict(row._mapping) if row is not None else None
