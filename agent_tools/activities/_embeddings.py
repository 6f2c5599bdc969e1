"""Semantic recall's two halves: the embeddings client and each worker's in-memory vector index.

**Client.** :class:`Embedder` speaks OpenAI's ``POST {base_url}/embeddings`` wire format (OpenAI, vLLM, Ollama,
llama.cpp, LiteLLM all serve it). What comes back is outside input: the body is read up to a size bound and
every vector is checked and normalised by :func:`agent_tools.contracts._memory.scoring.encode_vector` before it
can reach the store. Any failure is an :class:`EmbeddingsUnavailable`; the memory engine then saves without
a vector and searches by full text only, so an endpoint that is down never costs a memory or a recall.

**Index.** Neither pgvector (not packaged for this PostgreSQL) nor sqlite-vec (this Python's ``sqlite3``
cannot load extensions) is available where the engine must run, so vectors are stored in the ``memories``
table as float32 blobs (``embedding``, with the ``embedding_model`` that made them) and searched exactly, by
cosine, in the worker: :class:`VectorIndex` keeps each scope's vectors as one numpy matrix, loaded on the
first search and refreshed from then on by the rows saved since (``ix_memories_scope_updated``). A matrix
product over 100,000 384-dimension vectors takes a few milliseconds; the nearest rows are then looked up in
the store, where liveness, tier and scope are checked as for full-text candidates. docs/design-notes.md
("Semantic recall") has the reasoning and the figures.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy import Connection, func, select

from agent_tools._errors import ProviderError
from agent_tools._store.memory_tables import memories
from agent_tools.contracts._memory import scoring
from agent_tools.contracts._memory.settings import MAX_EMBEDDING_DIMENSIONS, EmbeddingsEndpoint

if TYPE_CHECKING:
    # numpy is imported where a vector is first handled, not with this module: a worker loads this module
    # with the memory activities, and only a semantic search (an embeddings endpoint) needs numpy's memory.
    import numpy as np

log = logging.getLogger(__name__)

# A response body larger than this is refused unread: a vector of MAX_EMBEDDING_DIMENSIONS numbers written
# out in JSON takes well under 100 KB.
MAX_RESPONSE_BYTES_PER_INPUT = 30 * MAX_EMBEDDING_DIMENSIONS + 1024
# Rows re-read at every refresh: saves whose transaction committed after a later-stamped one was read.
REFRESH_OVERLAP = timedelta(seconds=10)


class EmbeddingsUnavailable(ProviderError):
    """The embeddings endpoint failed or answered something that is not an embedding (searches fall back to
    full text; saves keep the memory without a vector)."""


class Embedder:
    """One configured endpoint, over the worker's shared HTTP client."""

    def __init__(self, endpoint: EmbeddingsEndpoint, http: httpx.AsyncClient) -> None:
        self.endpoint = endpoint
        self.http = http

    @property
    def model(self) -> str:
        """What the store records beside each vector: vectors of another model (or size) are not comparable."""
        e = self.endpoint
        return e.model if e.dimensions is None else f"{e.model}@{e.dimensions}"

    async def embed(self, texts: list[str]) -> list[bytes]:
        """One vector per text, in order, as the store keeps them (unit length, float32)."""
        e = self.endpoint
        body: dict[str, Any] = {"model": e.model, "input": texts}
        if e.dimensions is not None:
            body["dimensions"] = e.dimensions
        headers = {"Authorization": f"Bearer {e.api_key}"} if e.api_key else {}
        url = e.base_url.rstrip("/") + "/embeddings"
        cap = MAX_RESPONSE_BYTES_PER_INPUT * len(texts)
        try:
            async with self.http.stream("POST", url, json=body, headers=headers, timeout=e.timeout_seconds) as r:
                raw = bytearray()
                async for chunk in r.aiter_bytes():
                    raw += chunk
                    if len(raw) > cap:
                        raise EmbeddingsUnavailable(f"the embeddings endpoint sent more than {cap} bytes")
                status = r.status_code
        except httpx.HTTPError as exc:
            raise EmbeddingsUnavailable(f"the embeddings endpoint {url} failed: {type(exc).__name__}") from exc
        if status != 200:
            raise EmbeddingsUnavailable(f"the embeddings endpoint answered HTTP {status}: {bytes(raw[:200])!r}")
        return self._vectors(bytes(raw), len(texts))

    def _vectors(self, raw: bytes, count: int) -> list[bytes]:
        import json

        try:
            payload = json.loads(raw)
            data = payload["data"]
            if not isinstance(data, list) or len(data) != count:
                raise ValueError(f"{count} embeddings were asked for")
            items = sorted(data, key=lambda item: int(item.get("index", 0)))
            vectors = [scoring.encode_vector(item["embedding"], MAX_EMBEDDING_DIMENSIONS) for item in items]
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise EmbeddingsUnavailable(f"the embeddings endpoint's answer is not an embedding: {exc}") from exc
        if len({len(v) for v in vectors}) > 1:
            raise EmbeddingsUnavailable("the embeddings endpoint answered vectors of different sizes")
        return vectors


# Rows per block of a cached scope (1.5 MB at 384 dimensions): saves rebuild only the last block, and a scan
# of the store reads this many rows at a time.
BLOCK_ROWS = 4096


@dataclass(frozen=True)
class Snapshot:
    """A scope's vectors as blocks of (matrix, seqs) that nobody changes (a refresh replaces a block)."""

    blocks: tuple[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]], ...]
    dead: frozenset[int]  # seqs whose row lost its vector (or changed model) since it was cached
    dimensions: int


def best(sims: np.ndarray[Any, Any], seqs: np.ndarray[Any, Any], k: int) -> tuple[Any, Any]:
    """The ``k`` best (seqs, sims), ordered by similarity then seq: one total order, so the best of a union
    is the best of each part's best, whatever the blocks (cached or scanned from the store)."""
    import numpy as np

    if sims.shape[0] > k:
        kth = np.partition(sims, sims.shape[0] - k)[sims.shape[0] - k]
        keep = np.flatnonzero(sims >= kth)  # every row tied with the k-th, so the seq order decides
        sims, seqs = sims[keep], seqs[keep]
    order = np.lexsort((seqs, -sims))[:k]
    return seqs[order], sims[order]


def rank_blocks(
    blocks: Sequence[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]],
    q: np.ndarray[Any, Any],
    k: int,
    dead: frozenset[int] = frozenset(),
) -> tuple[Any, Any]:
    """The ``k`` best rows of ``blocks`` for the unit query ``q`` (one product per block).

    einsum, not ``matrix @ q``: its sum for a row does not depend on where the row sits in its block, so
    cached blocks and a scan of the store score every row alike, to the bit (BLAS's kernels do not). It
    releases the GIL: the blocks are split over up to :data:`RANK_THREADS` threads, the caller's one."""
    import numpy as np

    parts = min(RANK_THREADS, len(blocks))
    share = -(-len(blocks) // parts) if parts else 0
    groups = [blocks[i : i + share] for i in range(0, len(blocks), share)] if share else []
    others = [_pool().submit(_rank_group, g, q, k, dead) for g in groups[1:]]
    found = [_rank_group(groups[0], q, k, dead)] if groups else []
    found += [f.result() for f in others]
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    return best(np.concatenate([v for _, v in found]), np.concatenate([s for s, _ in found]), k)


# Threads for the products of one search beside the caller's (einsum runs in one thread).
RANK_THREADS = min(4, os.cpu_count() or 1)
_threads: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _threads
    if _threads is None:
        _threads = ThreadPoolExecutor(max_workers=max(1, RANK_THREADS - 1), thread_name_prefix="agent-tools-rank")
    return _threads


def _rank_group(
    blocks: Sequence[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]],
    q: np.ndarray[Any, Any],
    k: int,
    dead: frozenset[int],
) -> tuple[Any, Any]:
    import numpy as np

    dead_seqs = np.fromiter(dead, dtype=np.int64) if dead else None
    parts_seqs, parts_sims = [], []
    for matrix, seqs in blocks:
        sims = np.einsum("ij,j->i", matrix, q)
        if dead_seqs is not None:
            sims[np.isin(seqs, dead_seqs)] = -np.inf
        s, v = best(sims, seqs, k)
        parts_seqs.append(s)
        parts_sims.append(v)
    return best(np.concatenate(parts_sims), np.concatenate(parts_seqs), k)


def _block(rows: Sequence[Any], d: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """Rows (seq, embedding) of ``d`` dimensions as one block; rows of another size are left out."""
    import numpy as np

    rows = [r for r in rows if len(r.embedding) == 4 * d]
    if not rows:
        return None
    matrix = np.frombuffer(b"".join(r.embedding for r in rows), dtype="<f4").reshape(len(rows), d)
    return matrix, np.asarray([r.seq for r in rows], dtype=np.int64)


@dataclass
class _ScopeVectors:
    dimensions: int = 0
    blocks: list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]] = field(default_factory=list)
    dead: set[int] = field(default_factory=set)
    max_seq: int = -1
    through: datetime | None = None  # the latest updated_at read so far

    @property
    def nbytes(self) -> int:
        return sum(m.nbytes + s.nbytes for m, s in self.blocks)

    def snapshot(self) -> Snapshot:
        return Snapshot(tuple(self.blocks), frozenset(self.dead), self.dimensions)


class VectorIndex:
    """Each scope's vectors (of one model) in memory, within ``budget_bytes`` for all scopes together: loaded
    on a scope's first search, refreshed incrementally from then on, least recently used scopes dropped to
    make room. A scope larger than the whole budget is not cached: each search scans its vectors in the
    store, :data:`BLOCK_ROWS` at a time (the same answer, slower)."""

    def __init__(self, budget_bytes: int = 256 * 2**20) -> None:
        self.budget_bytes = budget_bytes
        self._scopes: OrderedDict[tuple[str, str], _ScopeVectors] = OrderedDict()
        # Scopes found too large, with the size they had: they are scanned, not loaded, until they shrink.
        self._oversize: dict[tuple[str, str], int] = {}
        # Searches run in Store.run's worker threads (SQLite), several at once: changing the entries holds the
        # lock. Nothing that waits runs under it: on PostgreSQL the statements run on the event loop's
        # thread (greenlets), and a lock held across one would block the loop for good.
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(e.nbytes for e in self._scopes.values())

    def snapshot(self, conn: Connection, scope_where: Any, scope_key: str, model: str) -> Snapshot | None:
        """The scope's vectors as of now, for :meth:`rank`: :meth:`cached`, else loaded from the store (in a
        transaction: the rows are streamed); None when the scope does not fit the budget (:meth:`scan` then
        answers)."""
        snap = self.cached(conn, scope_where, scope_key, model)
        return snap if snap is not None else self._load(conn, scope_where, (scope_key, model))

    def cached(self, conn: Connection, scope_where: Any, scope_key: str, model: str) -> Snapshot | None:
        """The scope's cached vectors, refreshed by the rows written since the last refresh (one statement,
        which needs no transaction); None when the scope is not cached."""
        key = (scope_key, model)
        with self._lock:
            entry = self._scopes.get(key)
            if entry is None:
                return None
            self._scopes.move_to_end(key)  # most recently used last
            through = entry.through
        c = memories.c
        stmt = select(c.seq, c.embedding, c.embedding_model, c.updated_at).where(scope_where)
        if through is not None:
            stmt = stmt.where(c.updated_at >= through - REFRESH_OVERLAP)
        fresh = conn.execute(stmt).all()  # outside the lock: it may wait (see __init__)
        with self._lock:
            if fresh:
                self._apply(entry, fresh, model)
            if entry.nbytes > self.budget_bytes:
                self._scopes.pop(key, None)
                self._oversize[key] = entry.nbytes
                return None
            self._fit(key)
            return entry.snapshot()

    def _load(self, conn: Connection, scope_where: Any, key: tuple[str, str]) -> Snapshot | None:
        c = memories.c
        if key in self._oversize:
            n, size = conn.execute(
                select(func.count(), func.max(func.length(c.embedding))).where(
                    scope_where, c.embedding_model == key[1], c.embedding.is_not(None)
                )
            ).one()
            if int(n or 0) * (int(size or 0) + 8) > self.budget_bytes:
                return None
        # Rows committed after this read are stamped after this instant, less the overlap (see REFRESH_OVERLAP).
        entry = _ScopeVectors(through=datetime.now(UTC))
        stmt = select(c.seq, c.embedding, c.updated_at).where(
            scope_where, c.embedding_model == key[1], c.embedding.is_not(None)
        )
        for part in conn.execute(stmt.execution_options(yield_per=BLOCK_ROWS)).partitions():
            if entry.dimensions == 0:
                entry.dimensions = len(part[0].embedding) // 4
            block = _block(part, entry.dimensions)
            if block is not None:
                entry.blocks.append((block[0].copy(), block[1]))
                entry.max_seq = max(entry.max_seq, int(block[1].max()))
            entry.through = _latest(entry.through, part)
            with self._lock:
                if entry.nbytes > self.budget_bytes:
                    self._oversize[key] = entry.nbytes
                    return None  # the rest is not read: the scan answers this search
                self._fit(key, entry.nbytes)  # room made as it loads: the budget holds during a load too
        with self._lock:
            self._oversize.pop(key, None)
            current = self._scopes.get(key)
            if current is None:  # a concurrent first search may have loaded it already
                self._scopes[key] = current = entry
            self._fit(key)
            return current.snapshot()

    def _fit(self, keep: tuple[str, str], loading: int = 0) -> None:
        """Drop the least recently used scopes (never ``keep``) until the cache, and ``loading`` bytes of a
        scope being loaded, are within the budget."""
        total = loading + sum(e.nbytes for k, e in self._scopes.items() if k != keep or not loading)
        for key in list(self._scopes):
            if total <= self.budget_bytes:
                break
            if key != keep:
                total -= self._scopes.pop(key).nbytes

    @staticmethod
    def _apply(entry: _ScopeVectors, fresh: Sequence[Any], model: str) -> None:
        """Rows written since the last refresh: new vectors appended, changed ones replaced, rows that lost
        theirs (or got another model's) marked dead. Blocks are replaced, never changed in place."""
        import numpy as np

        entry.through = _latest(entry.through, fresh)
        if entry.dimensions == 0:
            sized = [r for r in fresh if r.embedding is not None and r.embedding_model == model]
            if not sized:
                return
            entry.dimensions = len(sized[0].embedding) // 4
        d = entry.dimensions
        added = []
        for row in fresh:
            has = row.embedding is not None and row.embedding_model == model and len(row.embedding) == 4 * d
            at = _find(entry, row.seq) if row.seq <= entry.max_seq else None
            if at is None:
                if has:
                    added.append(row)
                continue
            b, i = at
            if has:
                matrix, seqs = entry.blocks[b]
                matrix = matrix.copy()
                matrix[i] = np.frombuffer(row.embedding, dtype="<f4")
                entry.blocks[b] = (matrix, seqs)
                entry.dead.discard(row.seq)
            else:
                entry.dead.add(row.seq)
        block = _block(added, d)
        if block is None:
            return
        entry.max_seq = max(entry.max_seq, int(block[1].max()))
        if entry.blocks and entry.blocks[-1][0].shape[0] + block[0].shape[0] <= BLOCK_ROWS:
            last = entry.blocks.pop()
            block = (np.vstack([last[0], block[0]]), np.concatenate([last[1], block[1]]))
        entry.blocks.append((block[0].copy(), block[1]))

    @staticmethod
    def rank(snapshot: Snapshot, query: bytes, k: int, floor: float) -> list[tuple[int, float]]:
        """The ``k`` most similar rows (seq, cosine) with a cosine of at least ``floor``, best first.

        Pure numpy over arrays nobody changes (a refresh replaces them), so it may run in any thread."""
        import numpy as np

        q = np.frombuffer(query, dtype="<f4")
        if q.shape[0] != snapshot.dimensions:
            return []
        seqs, sims = rank_blocks(snapshot.blocks, q, k, snapshot.dead)
        return [(int(s), float(v)) for s, v in zip(seqs, sims, strict=True) if v >= floor]

    @staticmethod
    def scan(
        conn: Connection, scope_where: Any, model: str, query: bytes, k: int, floor: float
    ) -> list[tuple[int, float]]:
        """What :meth:`rank` answers, straight from the store: the scope's vectors read and multiplied
        :data:`BLOCK_ROWS` at a time, so memory stays at one block whatever the scope's size."""
        import numpy as np

        q = np.frombuffer(query, dtype="<f4")
        d = q.shape[0]
        c = memories.c
        stmt = select(c.seq, c.embedding).where(scope_where, c.embedding_model == model, c.embedding.is_not(None))
        top_seqs, top_sims = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        for part in conn.execute(stmt.execution_options(yield_per=BLOCK_ROWS)).partitions():
            block = _block(part, d)
            if block is None:
                continue
            seqs, sims = rank_blocks([block], q, k)
            top_seqs, top_sims = best(np.concatenate([top_sims, sims]), np.concatenate([top_seqs, seqs]), k)
        return [(int(s), float(v)) for s, v in zip(top_seqs, top_sims, strict=True) if v >= floor]


def _find(entry: _ScopeVectors, seq: int) -> tuple[int, int] | None:
    """Where ``seq`` is in the entry's blocks (block, row), or None."""
    import numpy as np

    for b, (_, seqs) in enumerate(entry.blocks):
        hit = np.flatnonzero(seqs == seq)
        if hit.shape[0]:
            return b, int(hit[0])
    return None


def _latest(through: datetime | None, rows: Sequence[Any]) -> datetime | None:
    for row in rows:
        stamp = row.updated_at if row.updated_at.tzinfo else row.updated_at.replace(tzinfo=UTC)
        through = stamp if through is None else max(through, stamp)
    return through
