"""Recall latency over a large memory store: p50/p95 of MemoryEngine.search (what recall, searchMemory and
memory_recall run), on SQLite and PostgreSQL, interleaved over several repeats with their spread.

    python bench/memory_recall.py                               # SQLite in a temp dir + local PostgreSQL
    python bench/memory_recall.py --url sqlite+aiosqlite:///x.db --memories 100000 --queries 300 --repeats 5
    python bench/memory_recall.py --keep ...                    # keep (and reuse) the loaded rows
    python bench/memory_recall.py --hybrid ...                  # also semantic recall (embeddings + RRF)
    python bench/memory_recall.py --keep --scopes 2             # two large scopes in the table
    python bench/memory_recall.py --keep --hybrid --vector-cache-mb 0   # a scope beyond the cache's budget

``--scopes N`` puts N large scopes of ``--memories`` each in the table (the timed one first): the search must
narrow by scope inside the index, or it reads the other scopes' matches too.

``--hybrid`` loads a second scope whose memories carry 384-dimension embeddings and times the hybrid search
(query embedding from bench/embeddings_server.py in its own process, over HTTP, full text, exact cosine
over the scope's vectors, reciprocal rank fusion) next to the full-text one.

All memories go into ONE scope (the worst case: the full-text match cannot be narrowed by scope first), plus
10% more in other scopes. The PostgreSQL rows are deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import delete, func, select, text

from agent_tools._store.db import Store
from agent_tools._store.memory_tables import memories
from agent_tools.activities._memory import MemoryEngine, Scope
from agent_tools.contracts._memory import scoring
from agent_tools.contracts._memory.settings import EmbeddingsEndpoint, MemoryPolicy

try:
    from bench.embeddings_server import embed_text
except ImportError:  # run as a script: bench/ is on the path, the repository root is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.embeddings_server import embed_text

DEFAULT_URLS = [None, "postgresql+asyncpg://postgres@127.0.0.1:5432/test"]


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size * 2)}
    return sorted(words)[:size]


def zipf_pick(rng: random.Random, words: list[str]) -> str:
    # Natural-ish word frequencies: a few common words, a long tail.
    return words[min(len(words) - 1, int(rng.paretovariate(1.1)) - 1)]


def sentence(rng: random.Random, words: list[str]) -> str:
    return " ".join(
        zipf_pick(rng, words) if rng.random() < 0.3 else rng.choice(words) for _ in range(rng.randint(8, 24))
    )


HYBRID_DIMENSIONS = 384


def rows_for(
    scope: Scope, n: int, rng: random.Random, words: list[str], run: str, vectors: bool = False
) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    out = []
    for i in range(n):
        content = sentence(rng, words)
        extra: dict[str, Any] = {}
        if vectors:
            extra = {
                "embedding": scoring.encode_vector(embed_text(content, HYBRID_DIMENSIONS), 4096),
                "embedding_model": f"bench-embed@{HYBRID_DIMENSIONS}",
            }
        when = now - timedelta(days=rng.random() * 365)
        out.append(
            {
                # The scope's key in the id: ten "other" scopes share one run and one counter.
                "memory_id": f"mem_b{run}{i:07d}{scope.key[1:12]}",
                **scope.columns(),
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
            | extra
        )
    return out


async def load(
    store: Store, n: int, keep: bool, seed: int = 7, vectors: bool = False, scopes: int = 1
) -> tuple[Scope, float]:
    """Load ``n`` memories into one scope (or reuse a kept load of the same size), and ``scopes - 1`` more
    scopes of ``n`` beside it (other users of the same table, which a search must not wade through)."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    run = (f"k{n}x{scopes}" if keep else uuid.uuid4().hex[:6]) + ("h" if vectors else "")
    scope = Scope(f"bench-{run}", "p", "u", "agent")
    async with store.engine.connect() as conn:
        have = (await conn.execute(select(func.count()).select_from(memories).where(scope.where()))).scalar_one()
    if keep and have == n:
        return scope, 0.0
    others = [Scope(f"bench-{run}", "p", f"other{i}", "agent") for i in range(10)]
    large = [Scope(f"bench-{run}", "p", f"large{i}", "agent") for i in range(1, scopes)]
    t0 = time.perf_counter()
    batch = 5000
    pg = store.dialect == "postgresql"

    async def insert(conn: Any, rows: list[dict[str, Any]]) -> None:
        if not pg:
            await conn.execute(memories.insert(), rows)
            return
        # One multi-row INSERT per 1,000 rows (under asyncpg's 32,767 parameters): an executemany is one
        # statement per row, and memory_terms' statement-level trigger then ran once per row (100,000
        # memories were still loading after 25 minutes; this way they load in 89 s).
        for at in range(0, len(rows), 1000):
            await conn.execute(memories.insert().values(rows[at : at + 1000]))

    async with store.engine.begin() as conn:
        await conn.execute(delete(memories).where(memories.c.organisation == scope.organisation))
        for start in range(0, n, batch):
            await insert(conn, rows_for(scope, min(batch, n - start), rng, words, run + f"{start:07d}", vectors))
        for o in others:
            await insert(conn, rows_for(o, n // 100, rng, words, run + "o", vectors))
        for o in large:
            for start in range(0, n, batch):
                await insert(conn, rows_for(o, min(batch, n - start), rng, words, run + f"L{start:07d}", vectors))
    if store.dialect == "postgresql":
        # Fresh statistics, as autovacuum would have them in a running deployment.
        async with store.engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text("VACUUM ANALYZE memories"))
    return scope, time.perf_counter() - t0


def query_set(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    words = vocabulary(random.Random(7))
    return [
        " ".join(zipf_pick(rng, words) if rng.random() < 0.5 else rng.choice(words) for _ in range(rng.randint(2, 6)))
        for _ in range(n)
    ]


async def timed(engine: MemoryEngine, scope: Scope, queries: list[str]) -> tuple[list[float], int]:
    timings = []
    hits = 0
    for q in queries:
        t = time.perf_counter()
        found = await engine.search(scope, q, limit=10)
        timings.append((time.perf_counter() - t) * 1000)
        hits += bool(found)
    return sorted(timings), hits


def pct(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[int(q * (len(sorted_ms) - 1))]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} ms [{min(values):.2f}-{max(values):.2f}]"


@contextmanager
def embeddings_endpoint() -> Iterator[EmbeddingsEndpoint]:
    """bench/embeddings_server.py in its own process (a real endpoint is not in the worker's process)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.embeddings_server"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=str(Path(__file__).resolve().parent.parent),
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        yield EmbeddingsEndpoint(base_url=url, model="bench-embed", dimensions=HYBRID_DIMENSIONS)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", action="append", help="store URL (repeatable); default: SQLite temp + local PG")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds over the stores")
    parser.add_argument("--keep", action="store_true", help="keep the loaded rows and reuse them next time")
    parser.add_argument("--hybrid", action="store_true", help="also time semantic (hybrid) recall")
    parser.add_argument(
        "--vector-cache-mb",
        type=int,
        default=None,
        help="the hybrid engine's vector cache (default: the setting's); 0 scans the store at every search",
    )
    parser.add_argument(
        "--scopes", type=int, default=1, help="large scopes of --memories each in the table (the timed one first)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        urls = args.url or [u or f"sqlite+aiosqlite:///{tmp}/bench.sqlite" for u in DEFAULT_URLS]
        runs: list[tuple[str, Store, MemoryEngine, Scope]] = []
        http = httpx.AsyncClient()
        endpoint = stack.enter_context(embeddings_endpoint()) if args.hybrid else None
        for url in urls:
            store = Store(url)
            await store.create_schema()
            kind = url.split("://")[0]
            scope, load_s = await load(store, args.memories, args.keep, scopes=args.scopes)
            engine = MemoryEngine(store)
            await timed(engine, scope, query_set(20, seed=3))  # warm caches and connections
            runs.append((kind, store, engine, scope))
            print(f"{kind}: {args.memories} memories loaded in {load_s:.1f} s", flush=True)
            if endpoint is not None:
                hscope, load_s = await load(store, args.memories, args.keep, vectors=True)
                cache = {} if args.vector_cache_mb is None else {"vector_cache_mb": args.vector_cache_mb}
                hybrid = MemoryEngine(store, MemoryPolicy(embeddings=endpoint, **cache), http=http)
                t = time.perf_counter()
                await timed(hybrid, hscope, query_set(20, seed=3))  # the first search loads the scope's vectors
                warm_s = time.perf_counter() - t
                runs.append((kind + " hybrid", store, hybrid, hscope))
                print(
                    f"{kind} hybrid: {args.memories} memories with vectors loaded in {load_s:.1f} s, "
                    f"vector index warmed in {warm_s:.1f} s",
                    flush=True,
                )
        queries = query_set(args.queries)
        p50: dict[str, list[float]] = {name: [] for name, *_ in runs}
        p95: dict[str, list[float]] = {name: [] for name, *_ in runs}
        for r in range(args.repeats):
            for name, _, engine, scope in runs:
                ms, hits = await timed(engine, scope, queries)
                p50[name].append(pct(ms, 0.5))
                p95[name].append(pct(ms, 0.95))
                print(
                    f"  round {r + 1} {name}: p50 {pct(ms, 0.5):.2f} ms  p95 {pct(ms, 0.95):.2f} ms  "
                    f"p99 {pct(ms, 0.99):.2f} ms  max {ms[-1]:.2f} ms  ({hits}/{len(queries)} with hits)",
                    flush=True,
                )
        print(f"{args.memories} memories, {args.queries} queries x {args.repeats} rounds: median [min-max]")
        for name, store, _, scope in runs:
            print(f"{name:27s} p50 {spread(p50[name])}   p95 {spread(p95[name])}")
            if not args.keep and store.dialect == "postgresql":
                async with store.engine.begin() as conn:
                    await conn.execute(delete(memories).where(memories.c.organisation == scope.organisation))
        for store in {id(s): s for _, s, _, _ in runs}.values():
            await store.close()
        await http.aclose()


if __name__ == "__main__":
    asyncio.run(main())
