"""Bench: the ingress's store work alone, in process: events stored and their waits claimed per second.

    python bench/events_store.py                       # 300 events one at a time and 32 at once, 3 rounds
    python bench/events_store.py --events 500 --concurrency 1,8,32 --rounds 3
    python bench/events_store.py --url postgresql+asyncpg://postgres@127.0.0.1:5432/bench_store  # createdb first

Each event goes through ``store_and_claim`` (what ``POST /v1/events`` does before it signals) against as
many open waits, one per event, each matching its event's payload. No HTTP, no Temporal: set beside
``bench/events_ingress.py``'s ingress rate, it shows how much of the ingress's cost per event is the store.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


async def one_round(url: str, events: int, concurrency: int) -> float:
    """Events per second for ``events`` events at ``concurrency``, on a fresh schema."""
    from agent_tools._store.db import Store
    from agent_tools._store.event_tables import add_subscription, event_id_for, store_and_claim
    from agent_tools.contracts._events.contract import EventRecord, Subscription

    store = Store(url)
    await store.create_schema()
    project = uuid.uuid4().hex[:8]  # a fresh scope per round: a shared PostgreSQL database keeps earlier rows
    now = datetime.now(UTC)
    try:
        for i in range(events):
            sub = Subscription(
                subscription_id=f"{project}-sub-{i}",
                session_id=f"{project}-s-{i}",
                kind="bench.tick",
                match={"n": str(i)},
                since=now - timedelta(seconds=5),
                deadline=now + timedelta(hours=1),
            )
            await add_subscription(store, "bench", project, sub)
        gate = asyncio.Semaphore(concurrency)

        async def deliver(i: int) -> int:
            async with gate:
                record = EventRecord(
                    event_id=event_id_for("bench", project, "api", f"d{i}"),
                    kind="bench.tick",
                    organisation="bench",
                    project=project,
                    source="api",
                    delivery_id=f"d{i}",
                    received_at=datetime.now(UTC),
                    payload={"n": str(i)},
                )
                _stored, claimed = await store_and_claim(store, record, size=20, now=datetime.now(UTC))
                return len(claimed)

        started = time.perf_counter()
        claimed = await asyncio.gather(*(deliver(i) for i in range(events)))
        elapsed = time.perf_counter() - started
        assert sum(claimed) == events, f"{sum(claimed)} of {events} waits claimed"
        return events / elapsed
    finally:
        await store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--concurrency", default="1,32", help="comma-separated; the rounds alternate them")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default=None, help="a database URL (default: a SQLite file in a temp dir)")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x]
    rates: dict[int, list[float]] = {level: [] for level in levels}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for level in levels:
                url = args.url or f"sqlite+aiosqlite:///{tmp}/store-{r}-{level}.sqlite"
                rates[level].append(await one_round(url, args.events, level))
    for level, values in rates.items():
        per_round = " ".join(f"{v:.0f}" for v in values)
        print(
            f"{args.events} events, concurrency {level}: {statistics.median(values):.0f} events/s "
            f"(per round {per_round}), {1000 / statistics.median(values):.2f} ms per event"
        )


if __name__ == "__main__":
    from agent_tools._process_exit import run_and_exit

    run_and_exit(lambda: asyncio.run(main()))
