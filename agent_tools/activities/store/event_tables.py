"""The events table: every event the ingress accepted, stored before it is acknowledged.

The primary key is derived from (organisation, project, source, delivery id), so a sender's retry or a
replayed delivery lands on the same row: nothing is stored twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, DateTime, Index, Integer, String, Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agent_tools.activities.store.db import Store, as_utc
from agent_tools.activities.store.tables import metadata
from agent_tools.boundaries import clean_json
from agent_tools.contracts.events import EventRecord, kind_matches, payload_matches

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


async def _insert_ignore(conn: AsyncConnection, row: dict[str, Any]) -> bool:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(events).values(row).on_conflict_do_nothing(index_elements=["event_id"])
    else:
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(events).values(row).on_conflict_do_nothing(index_elements=["event_id"])
    result = await conn.execute(stmt)
    return bool(result.rowcount)


async def store_event(store: Store, record: EventRecord, *, size: int = 0) -> StoredEvent:
    """Insert the event unless its id exists; returns the stored row (the first one on a duplicate)."""
    row = {
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
    async with store.engine.begin() as conn:
        if await _insert_ignore(conn, row):
            return StoredEvent(record=record, created=True)
        stored = (await conn.execute(select(events).where(events.c.event_id == record.event_id))).one()
    return StoredEvent(record=_record(stored), created=False)


async def get_event(store: Store, event_id: str) -> EventRecord | None:
    async with store.engine.connect() as conn:
        row = (await conn.execute(select(events).where(events.c.event_id == event_id))).one_or_none()
    return _record(row) if row is not None else None


async def count_events(store: Store, *, organisation: str, project: str) -> int:
    from sqlalchemy import func

    async with store.engine.connect() as conn:
        value = await conn.scalar(
            select(func.count())
            .select_from(events)
            .where(events.c.organisation == organisation, events.c.project == project)
        )
    return int(value or 0)


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + ".%"


async def find_matching(
    store: Store,
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
    async with store.engine.connect() as conn:
        rows = (await conn.execute(stmt)).all()
    for row in rows:
        if row.event_id in exclude or not kind_matches(kind, row.kind):
            continue
        if payload_matches(row.payload or {}, match):
            return _record(row)
    return None
