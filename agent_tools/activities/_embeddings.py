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
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
from sqlalchemy import Connection, select

from agent_tools._errors import ProviderError
from agent_tools._store.memory_tables import memories
from agent_tools.contracts._memory import MAX_EMBEDDING_DIMENSIONS, EmbeddingsEndpoint, scoring

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


@dataclass(frozen=True)
class Snapshot:
    matrix: np.ndarray[Any, Any]
    seqs: np.ndarray[Any, Any]
    dimensions: int


def _no_seqs() -> np.ndarray[Any, Any]:
    import numpy as np

    return np.zeros(0, dtype=np.int64)


def _no_matrix() -> np.ndarray[Any, Any]:
    import numpy as np

    return np.zeros((0, 0), dtype=np.float32)


@dataclass
class _ScopeVectors:
    dimensions: int = 0
    seqs: np.ndarray[Any, Any] = field(default_factory=_no_seqs)
    matrix: np.ndarray[Any, Any] = field(default_factory=_no_matrix)
    rows: dict[int, int] = field(default_factory=dict)  # seq -> row of the matrix
    through: datetime | None = None  # the latest updated_at read so far


class VectorIndex:
    """Each scope's vectors (of one model) in memory, refreshed incrementally; least recently used scopes
    are dropped once the index holds more than ``max_vectors``."""

    def __init__(self, max_vectors: int = 1_000_000) -> None:
        self.max_vectors = max_vectors
        self._scopes: OrderedDict[tuple[str, str], _ScopeVectors] = OrderedDict()
        # Searches run in Store.run's worker threads (SQLite), several at once: changing the arrays holds the
        # lock. Nothing that waits runs under it: on PostgreSQL the statements run on the event loop's
        # thread (greenlets), and a lock held across one would block the loop for good.
        self._lock = threading.Lock()

    def snapshot(self, conn: Connection, scope_where: Any, scope_key: str, model: str) -> Snapshot:
        """The scope's vectors as of now (refreshed from the store), for :meth:`rank`."""
        entry = self._refresh(conn, scope_where, scope_key, model)
        with self._lock:
            return Snapshot(entry.matrix, entry.seqs, entry.dimensions)

    @staticmethod
    def rank(snapshot: Snapshot, query: bytes, k: int, floor: float) -> list[tuple[int, float]]:
        """The ``k`` most similar rows (seq, cosine) with a cosine of at least ``floor``, best first.

        Pure numpy over arrays nobody changes (a refresh replaces them), so it may run in any thread."""
        import numpy as np

        q = np.frombuffer(query, dtype="<f4")
        matrix, seqs = snapshot.matrix, snapshot.seqs
        if seqs.shape[0] == 0 or q.shape[0] != snapshot.dimensions:
            return []
        similarity = matrix[: seqs.shape[0]] @ q
        k = min(k, similarity.shape[0])
        best = np.argpartition(-similarity, k - 1)[:k]
        best = best[np.argsort(-similarity[best], kind="stable")]
        return [(int(seqs[i]), float(similarity[i])) for i in best if similarity[i] >= floor]

    def nearest(
        self, conn: Connection, scope_where: Any, scope_key: str, model: str, query: bytes, k: int, floor: float
    ) -> list[tuple[int, float]]:
        """:meth:`snapshot` then :meth:`rank`, in the calling thread."""
        return self.rank(self.snapshot(conn, scope_where, scope_key, model), query, k, floor)

    def _refresh(self, conn: Connection, scope_where: Any, scope_key: str, model: str) -> _ScopeVectors:
        key = (scope_key, model)
        with self._lock:
            entry = self._scopes.pop(key, None) or _ScopeVectors()
            self._scopes[key] = entry  # most recently used last
            through = entry.through
        c = memories.c
        stmt = select(c.seq, c.embedding, c.updated_at).where(
            scope_where, c.embedding_model == model, c.embedding.is_not(None)
        )
        if through is not None:
            stmt = stmt.where(c.updated_at >= through - REFRESH_OVERLAP)
        fresh = conn.execute(stmt).all()  # outside the lock: it may wait (see __init__)
        with self._lock:
            if fresh:
                self._add(entry, fresh)
            while sum(e.matrix.shape[0] for e in self._scopes.values()) > self.max_vectors and len(self._scopes) > 1:
                self._scopes.popitem(last=False)
        return entry

    @staticmethod
    def _add(entry: _ScopeVectors, fresh: Sequence[Any]) -> None:
        import numpy as np

        if entry.dimensions == 0:
            entry.dimensions = len(fresh[0].embedding) // 4
        d = entry.dimensions
        new_seqs: list[int] = []
        new_rows: list[bytes] = []
        for row in fresh:
            if len(row.embedding) != 4 * d:
                continue  # another size under the same model name: not comparable, left out
            at = entry.rows.get(row.seq)
            if at is not None:
                entry.matrix[at] = np.frombuffer(row.embedding, dtype="<f4")  # re-embedded (content changed)
            else:
                new_seqs.append(row.seq)
                new_rows.append(row.embedding)
            stamp = row.updated_at if row.updated_at.tzinfo else row.updated_at.replace(tzinfo=_utc())
            entry.through = stamp if entry.through is None else max(entry.through, stamp)
        if new_rows:
            block = np.frombuffer(b"".join(new_rows), dtype="<f4").reshape(len(new_rows), d)
            start = entry.matrix.shape[0]
            entry.matrix = np.vstack([entry.matrix.reshape(start, d), block]) if start else block.copy()
            entry.seqs = np.concatenate([entry.seqs, np.asarray(new_seqs, dtype=np.int64)])
            entry.rows.update({seq: start + i for i, seq in enumerate(new_seqs)})


def _utc() -> Any:
    from datetime import UTC

    return UTC
