"""Recall latency over a large memory store: p50/p95 of MemoryEngine.search (what recall, searchMemory and
memory_recall run), on SQLite and PostgreSQL, interleaved over several repeats with their spread.

    python bench/memory_recall.py                               # SQLite in a temp dir + local PostgreSQL
    python bench/memory_recall.py --url sqlite+aiosqlite:///x.db --memories 100000 --queries 300 --repeats 5
    python bench/memory_recall.py --keep ...                    # keep (and reuse) the loaded rows
    python bench/memory_recall.py --hybrid ...                  # also semantic recall (embeddings + RRF)
    python bench/memory_recall.py --compare --keep --scopes 2   # PostgreSQL before revision 0006, side by side

``--compare`` also times the PostgreSQL search as it was before revision 0006 (``LegacyEngine``) on a copy of
the rows in a schema at revision 0004 (``memory_recall_before``), interleaved with the current one, and prints
each round's after/before ratio. ``--scopes N`` puts N large scopes of ``--memories`` each in the table (the
timed one first): with the scope outside the index, a search also read the other scopes' matches.

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
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Connection, delete, func, literal_column, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from agent_tools.activities.memory import _COLUMNS, MemoryEngine, Scope, T
from agent_tools.activities.store.db import Store
from agent_tools.activities.store.memory_tables import memories
from agent_tools.contracts.memory import EmbeddingsEndpoint, MemoryPolicy, scoring

try:
    from bench.embeddings_server import embed_text
except ImportError:  # run as a script: bench/ is on the path, the repository root is not
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from bench.embeddings_server import embed_text

DEFAULT_URLS = [None, "postgresql+asyncpg://postgres@127.0.0.1:5432/test"]


class LegacyEngine(MemoryEngine):
    """The PostgreSQL search as it was before revision 0006 (``--compare``), on a schema at 0004: one
    transaction with SET LOCAL plan_cache_mode, document frequencies counted from the word-only GIN index,
    the common-words query free to use that index. SQLite's search did not change."""

    async def _read(self, fn: Callable[[Connection], T]) -> T:
        return await self.store.run(fn)

    def _candidates(
        self, conn: Connection, scope: Scope, terms: list[str], tier: str | None, now: datetime
    ) -> list[Any]:
        conn.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
        return super()._candidates(conn, scope, terms, tier, now)

    def _doc_frequencies(self, conn: Connection, scope: Scope, terms: list[str], sqlite: bool) -> dict[str, int]:
        assert not sqlite
        params: dict[str, Any] = {"cap": scoring.COMMON_DF, "k": scope.key}
        parts = []
        for i, term in enumerate(terms):
            params[f"q{i}"] = scoring.tsquery([term])
            parts.append(
                f"(SELECT count(*) FROM (SELECT 1 FROM memories WHERE search @@ to_tsquery('english', :q{i}) "
                f"AND scope_key = :k LIMIT :cap) AS h{i})"
            )
        row = conn.execute(text("SELECT " + ", ".join(parts)).bindparams(**params)).one()
        return {term: int(row[i]) for i, term in enumerate(terms)}

    def _pg_candidates(
        self, conn: Connection, scope: Scope, use: list[str], ranked: bool, want: int, tier: str | None, now: datetime
    ) -> list[Any]:
        query = func.to_tsquery("english", scoring.tsquery(use))
        if ranked:
            conds = [literal_column("memories.search").op("@@")(query), scope.where(), self.live(now)]
            if tier:
                conds.append(memories.c.tier == tier)
            bounded = (
                select(*_COLUMNS, literal_column("memories.search").label("search"))
                .where(*conds)
                .limit(scoring.rank_bound())
                .subquery("bounded")
            )
            score = func.ts_rank_cd(bounded.c.search, query)
            ranked_stmt = (
                select(*[bounded.c[col.name] for col in _COLUMNS], score.label("score"))
                .order_by(score.desc())
                .limit(want)
            )
            return list(conn.execute(ranked_stmt).all())
        stmt = (
            select(*_COLUMNS, literal_column("0.0").label("score"))
            .where(literal_column("memories.search").op("@@")(query), scope.where(), self.live(now))
            .order_by(memories.c.updated_at.desc())
            .limit(want)
        )
        if tier:
            stmt = stmt.where(memories.c.tier == tier)
        return list(conn.execute(stmt).all())


BEFORE_SCHEMA = "memory_recall_before"


async def before_store(url: str) -> Store:
    """A store on its own PostgreSQL schema at revision 0004 (created at the newest, then downgraded)."""
    from alembic import command

    from agent_tools.activities.store.migrations import alembic_config, current_revision

    admin = create_async_engine(url)
    async with admin.begin() as conn:
        await conn.execute(text(f"CREATE SCHEMA IF NOT EXISTS {BEFORE_SCHEMA}"))
    await admin.dispose()
    engine = create_async_engine(
        url, pool_size=10, max_overflow=20, connect_args={"server_settings": {"search_path": BEFORE_SCHEMA}}
    )
    store = Store(url, engine=engine)
    async with engine.connect() as conn:
        revision = await conn.run_sync(current_revision)
    if revision == "0004":  # kept from an earlier --keep run (create_schema would upgrade it)
        return store
    await store.create_schema()
    async with engine.begin() as conn:
        await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0004"))
    return store


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
        "--compare",
        action="store_true",
        help="PostgreSQL: also the search before revision 0006, on a copy of the rows in a schema at 0004",
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
            if args.compare and store.dialect == "postgresql":
                old = await before_store(url)
                old_scope, load_s = await load(old, args.memories, args.keep, scopes=args.scopes)
                legacy = LegacyEngine(old)
                await timed(legacy, old_scope, query_set(20, seed=3))
                runs.append((kind + " before", old, legacy, old_scope))
                print(f"{kind} before: {args.memories} memories loaded in {load_s:.1f} s (schema {BEFORE_SCHEMA})")
            if endpoint is not None:
                hscope, load_s = await load(store, args.memories, args.keep, vectors=True)
                hybrid = MemoryEngine(store, MemoryPolicy(embeddings=endpoint), http=http)
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
            if name + " before" in p50:
                # Each round's own ratio: the two ran back to back in that round, on the same machine load.
                for label, by in (("p50", p50), ("p95", p95)):
                    ratios = [new / old for new, old in zip(by[name], by[name + " before"], strict=True)]
                    per_round = " ".join(f"{r:.2f}" for r in ratios)
                    print(f"{'':27s} {label} after/before {statistics.median(ratios):.2f}x (per round {per_round})")
            if not args.keep and store.dialect == "postgresql":
                async with store.engine.begin() as conn:
                    await conn.execute(delete(memories).where(memories.c.organisation == scope.organisation))
        for store in {id(s): s for _, s, _, _ in runs}.values():
            await store.close()
        if args.compare and not args.keep:
            for url in urls:
                if url.startswith("postgresql"):
                    admin = create_async_engine(url)
                    async with admin.begin() as conn:
                        await conn.execute(text(f"DROP SCHEMA IF EXISTS {BEFORE_SCHEMA} CASCADE"))
                    await admin.dispose()
        await http.aclose()


if __name__ == "__main__":
    asyncio.run(main())
