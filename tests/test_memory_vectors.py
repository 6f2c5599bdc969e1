"""The vector index on SQLite and PostgreSQL (store_url): the cached path ranks exactly as a fresh scan of the
store does, before and after saves, re-embeddings and lost vectors; a scope beyond the byte budget is
scanned instead of cached and answers the same; the cache stays within its budget."""

from __future__ import annotations

import random
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import Connection, update

from agent_tools._store.db import Store
from agent_tools._store.memory_tables import memories
from agent_tools.activities import _embeddings
from agent_tools.activities._embeddings import VectorIndex
from agent_tools.activities._memory import MemoryEngine, Scope
from agent_tools.contracts._memory import scoring
from agent_tools.contracts._memory.settings import EmbeddingsEndpoint, MemoryPolicy
from bench.embeddings_server import embeddings_server

MODEL = "test-embed"
D = 16


def _unit(rng: np.random.Generator) -> bytes:
    return scoring.encode_vector([float(x) for x in rng.standard_normal(D)], 4096)


def _rows(scope: Scope, n: int, rng: np.random.Generator, tag: str, when: datetime) -> list[dict[str, Any]]:
    out = []
    shared = _unit(rng)  # every fifth row holds the same vector: ties, which only the seq order can break
    for i in range(n):
        out.append(
            {
                "memory_id": f"mem_v{tag}{i:05d}",
                **scope.columns(),
                "content": f"fact {tag} {i}",
                "content_hash": scoring.content_hash(f"fact {tag} {i}"),
                "tier": "long_term",
                "tags": "",
                "uses": 1,
                "created_by_call": f"t/{i}",
                "created_at": when,
                "updated_at": when,
                "last_used_at": when,
                "embedding": shared if i % 5 == 0 else _unit(rng),
                "embedding_model": MODEL,
            }
        )
    return out


async def _insert(store: Store, rows: list[dict[str, Any]]) -> None:
    await store.run(lambda conn: conn.execute(memories.insert(), rows))


def _reference(conn: Connection, scope: Scope, q: bytes, k: int) -> list[int]:
    """The k nearest seqs by float64 cosine, ties by seq: no code of the index."""
    c = memories.c
    rows = conn.execute(
        memories.select()
        .with_only_columns(c.seq, c.embedding)
        .where(scope.where(), c.embedding_model == MODEL, c.embedding.is_not(None))
    ).all()
    qv = np.frombuffer(q, dtype="<f4").astype(np.float64)
    scored = [(-float(np.frombuffer(r.embedding, dtype="<f4").astype(np.float64) @ qv), r.seq) for r in rows]
    return [seq for _, seq in sorted(scored)[:k]]


async def _compare(store: Store, index: VectorIndex, scope: Scope, queries: list[bytes], k: int) -> None:
    for q in queries:

        def both(conn: Connection, q: bytes = q) -> tuple[Any, Any, list[int]]:
            snap = index.snapshot(conn, scope.where(), scope.key, MODEL)
            assert snap is not None
            cached = VectorIndex.rank(snap, q, k, -1.0)
            scanned = VectorIndex.scan(conn, scope.where(), MODEL, q, k, -1.0)
            return cached, scanned, _reference(conn, scope, q, k)

        cached, scanned, reference = await store.run(both)
        assert cached == scanned  # seqs and scores, in order
        assert [seq for seq, _ in cached] == reference


async def test_the_cached_ranking_is_the_scan_of_the_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_embeddings, "BLOCK_ROWS", 7)  # many blocks, a partial last one, merges across them
    rng = np.random.default_rng(5)
    scope = Scope("vectors", "p", f"u{random.randrange(10**9)}", "agent")
    old = datetime.now(UTC) - timedelta(days=3)
    await _insert(store, _rows(scope, 60, rng, "a", old))
    await _insert(store, _rows(Scope("vectors", "p", "other", "agent"), 20, rng, "o", old))
    index = VectorIndex()
    queries = [_unit(rng) for _ in range(6)]
    await _compare(store, index, scope, queries, 25)
    # Saves after the load: new rows, a re-embedded row, a row that lost its vector, one of another model.
    now = datetime.now(UTC)
    await _insert(store, _rows(scope, 9, rng, "b", now))
    c = memories.c

    def change(conn: Connection) -> None:
        seqs = sorted(s for (s,) in conn.execute(memories.select().with_only_columns(c.seq).where(scope.where())))
        conn.execute(update(memories).where(c.seq == seqs[1]).values(embedding=queries[0], updated_at=now))
        conn.execute(update(memories).where(c.seq == seqs[2]).values(embedding=None, updated_at=now))
        conn.execute(update(memories).where(c.seq == seqs[3]).values(embedding_model="other", updated_at=now))

    await store.run(change)
    await _compare(store, index, scope, queries, 25)
    await _compare(store, index, scope, queries, 200)  # more than the scope holds
    (entry,) = index._scopes.values()
    assert sum(len(seqs) for _, seqs in entry.blocks) == 69 and len(entry.dead) == 2


async def test_a_scope_beyond_the_budget_is_scanned_and_answers_the_same(store_url: str) -> None:
    store = Store(store_url)
    await store.create_schema()
    try:
        async with AsyncExitStack() as stack:
            server = stack.enter_context(embeddings_server())
            endpoint = EmbeddingsEndpoint(base_url=server.base_url, model="fake-embed")
            scope = Scope("vectors", "p", f"u{random.randrange(10**9)}", "agent")
            small = Scope("vectors", "p", f"s{random.randrange(10**9)}", "agent")
            http = httpx.AsyncClient()
            stack.push_async_callback(http.aclose)
            # Two engines, as two workers with caches of their own, over one HTTP client.
            cached, tight = (MemoryEngine(store, MemoryPolicy(embeddings=endpoint), http=http) for _ in range(2))
            for i in range(30):
                await cached.save(
                    scope,
                    f"Alice drives automobile number {i}",
                    tier="long_term",
                    tags=[],
                    call_key=f"c{i}",
                    memory_id=f"mem_budget_{scope.user}_{i}",
                )
            await cached.save(
                small, "Bob parks a vehicle", tier="long_term", tags=[], call_key="s", memory_id=f"mem_s_{small.user}"
            )
            vector_bytes = 30 * (256 * 4 + 8)
            tight.vectors.budget_bytes = vector_bytes - 1  # one scope of 30 vectors does not fit
            for query in ["car", "which automobile", "coffee"]:
                want = [m.memory_id for m in await cached.search(scope, query, limit=20)]
                assert [m.memory_id for m in await tight.search(scope, query, limit=20)] == want
            assert tight.vectors.nbytes == 0 and (scope.key, "fake-embed") in tight.vectors._oversize
            # The small scope still fits and is cached; the large one is scanned again, correctly.
            assert [m.content for m in await tight.search(small, "car")] == ["Bob parks a vehicle"]
            assert 0 < tight.vectors.nbytes <= tight.vectors.budget_bytes
            assert len(await tight.search(scope, "car", limit=20)) == 20
            # Two scopes that fit one at a time: the least recently used one makes room.
            tight.vectors.budget_bytes = vector_bytes
            await tight.search(scope, "car")
            assert list(tight.vectors._scopes) == [(scope.key, "fake-embed")]
            assert tight.vectors.nbytes <= tight.vectors.budget_bytes
    finally:
        await store.close()
