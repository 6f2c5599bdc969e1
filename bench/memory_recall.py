"""Recall latency over a large memory store: p50/p95/p99 of MemoryEngine.search (what recall,
searchMemory and memory_recall run), on SQLite and PostgreSQL.

    python bench/memory_recall.py                               # SQLite in a temp dir + local PostgreSQL
    python bench/memory_recall.py --url sqlite+aiosqlite:///x.db --memories 100000 --queries 300

All memories go into ONE scope (the worst case: the full-text match cannot be narrowed by scope first), plus
10% more in other scopes. The PostgreSQL rows are deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete

from agent_tools.activities.memory import MemoryEngine, Scope
from agent_tools.activities.store.db import Store
from agent_tools.activities.store.memory_tables import memories
from agent_tools.contracts.memory import scoring

DEFAULT_URLS = [None, "postgresql+asyncpg://postgres@127.0.0.1:5432/test"]


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size * 2)}
    return sorted(words)[:size]


def zipf_pick(rng: random.Random, words: list[str]) -> str:
    # Natural-ish word frequencies: a few common words, a long tail.
    return words[min(len(words) - 1, int(rng.paretovariate(1.1)) - 1)]


def rows_for(scope: Scope, n: int, rng: random.Random, words: list[str], run: str) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    out = []
    for i in range(n):
        content = " ".join(
            zipf_pick(rng, words) if rng.random() < 0.3 else rng.choice(words) for _ in range(rng.randint(8, 24))
        )
        when = now - timedelta(days=rng.random() * 365)
        out.append(
            {
                "memory_id": f"mem_b{run}{i:07d}{scope.key[:4]}",
                "organisation": scope.organisation,
                "project": scope.project,
                "user_id": scope.user,
                "agent": scope.agent,
                "scope_key": scope.key,
                "content": content,
                "content_hash": scoring.content_hash(content + f"#{i}"),
                "tier": "long_term" if rng.random() < 0.8 else "working",
                "tags": "",
                "uses": 1,
                "last_call": None,
                "created_by_call": f"bench/{i}",
                "created_at": when,
                "updated_at": when,
                "last_used_at": now,
                "deleted_at": None,
            }
        )
    return out


async def bench(url: str, n: int, queries: int, seed: int = 7) -> dict[str, float]:
    rng = random.Random(seed)
    words = vocabulary(rng)
    store = Store(url)
    await store.create_schema()
    run = uuid.uuid4().hex[:6]
    scope = Scope(f"bench-{run}", "p", "u", "agent")
    others = [Scope(f"bench-{run}", "p", f"other{i}", "agent") for i in range(10)]
    t0 = time.perf_counter()
    batch = 5000
    async with store.engine.begin() as conn:
        for start in range(0, n, batch):
            await conn.execute(
                memories.insert(), rows_for(scope, min(batch, n - start), rng, words, run + f"{start:07d}")
            )
        for o in others:
            await conn.execute(memories.insert(), rows_for(o, n // 100, rng, words, run + "o"))
    load_s = time.perf_counter() - t0
    if store.dialect == "postgresql":
        # Fresh statistics, as autovacuum would have them in a running deployment.
        async with store.engine.connect() as conn:
            from sqlalchemy import text

            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text("VACUUM ANALYZE memories"))
    engine = MemoryEngine(store)
    for _ in range(10):  # warm caches and connections
        await engine.search(scope, " ".join(rng.choice(words) for _ in range(3)))
    timings = []
    hits = 0
    for _ in range(queries):
        q = " ".join(
            zipf_pick(rng, words) if rng.random() < 0.5 else rng.choice(words) for _ in range(rng.randint(2, 6))
        )
        t = time.perf_counter()
        found = await engine.search(scope, q, limit=10)
        timings.append((time.perf_counter() - t) * 1000)
        hits += bool(found)
    if store.dialect == "postgresql":
        async with store.engine.begin() as conn:
            await conn.execute(delete(memories).where(memories.c.organisation == scope.organisation))
    await store.close()
    timings.sort()
    return {
        "memories": n,
        "load_s": round(load_s, 1),
        "queries": queries,
        "with_hits": hits,
        "p50_ms": round(statistics.median(timings), 2),
        "p95_ms": round(timings[int(0.95 * (len(timings) - 1))], 2),
        "p99_ms": round(timings[int(0.99 * (len(timings) - 1))], 2),
        "max_ms": round(timings[-1], 2),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", action="append", help="store URL (repeatable); default: SQLite temp + local PG")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        urls = args.url or [u or f"sqlite+aiosqlite:///{tmp}/bench.sqlite" for u in DEFAULT_URLS]
        for url in urls:
            result = await bench(url, args.memories, args.queries)
            print(url.split("://")[0], result)


if __name__ == "__main__":
    asyncio.run(main())
