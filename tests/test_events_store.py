"""The events table on SQLite and PostgreSQL: idempotent inserts and the backlog query."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from agent_tools.activities.store.db import Store
from agent_tools.activities.store.event_tables import count_events, event_id_for, find_matching, get_event, store_event
from agent_tools.contracts.events import EventRecord


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


async def test_store_is_idempotent_and_backlog_matches(store_url: str) -> None:
    store = Store(store_url)
    await store.create_schema()
    project = f"p-{uuid.uuid4().hex[:8]}"
    t0 = datetime.now(UTC).replace(microsecond=0)
    try:
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
    finally:
        await store.close()
