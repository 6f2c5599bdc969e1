"""The memory engine: the memories of every scope, saved, searched and aged in the store.

Its three faces (RTC, FYAI, codai) and the Memory Context hook are in :mod:`._memory_tools`.

Every operation takes a :class:`Scope` built from the calling session (organisation, project, user,
agent); every statement filters on it, so no read, search, update or delete crosses a scope.

Idempotence under activity retries: a save's memory id is derived from the session and call ids, and each
row remembers the call that created it and the call that last used it. A retried save finds its own row
and answers as the first attempt did; a retried recall does not count a second use.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
from sqlalchemy import (
    Connection,
    Float,
    Integer,
    and_,
    case,
    cast,
    column,
    delete,
    func,
    literal_column,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.sql.elements import ColumnElement

from agent_tools._activity_io import SessionRef
from agent_tools._boundaries import clean_text
from agent_tools._errors import ToolFailure
from agent_tools._store.base import upsert_rows
from agent_tools._store.db import Store
from agent_tools._store.memory_tables import SCOPED_SEARCH, memories
from agent_tools.activities._embeddings import Embedder, EmbeddingsUnavailable, Snapshot, VectorIndex
from agent_tools.contracts._memory import scoring
from agent_tools.contracts._memory.contract import MemoryItem, Tier
from agent_tools.contracts._memory.format import (
    MemoryLine,
    aware,
    human_age,
)
from agent_tools.contracts._memory.settings import MemoryPolicy

log = logging.getLogger(__name__)

T = TypeVar("T")

# Deleted rows are kept this long (a retried delete still answers "deleted"), then purged.
PURGE_DELETED_AFTER = timedelta(days=30)


def utc_now() -> datetime:
    """The time every memory row is stamped and aged with."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Scope:
    organisation: str
    project: str
    user: str
    agent: str

    @classmethod
    def of(cls, ref: SessionRef) -> Scope:
        return cls(ref.organisation, ref.project, ref.user, ref.agent)

    @property
    def key(self) -> str:
        return scoring.scope_key(self.organisation, self.project, self.user, self.agent)

    def where(self) -> ColumnElement[bool]:
        return and_(memories.c.scope_key == self.key, self.owner())

    def columns(self) -> dict[str, str]:
        """The scope's columns of a memory row."""
        return {
            "organisation": self.organisation,
            "project": self.project,
            "user_id": self.user,
            "agent": self.agent,
            "scope_key": self.key,
        }

    def owner(self) -> ColumnElement[bool]:
        """The scope's four parts (which determine scope_key), without the indexed key itself."""
        c = memories.c
        return and_(
            c.organisation == self.organisation,
            c.project == self.project,
            c.user_id == self.user,
            c.agent == self.agent,
        )


@dataclass(frozen=True)
class Memory:
    memory_id: str
    content: str
    tier: str
    tags: list[str]
    uses: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: Any) -> Memory:
        return cls(
            memory_id=row.memory_id,
            content=row.content,
            tier=row.tier,
            tags=[t for t in (row.tags or "").split("|") if t],
            uses=int(row.uses),
            created_at=aware(row.created_at),
            updated_at=aware(row.updated_at),
        )

    def item(self, now: datetime) -> MemoryItem:
        return MemoryItem(
            memory_id=self.memory_id,
            content=self.content,
            tier=self.tier,  # type: ignore[arg-type]
            tags=self.tags,
            age=human_age(self.updated_at, now),
            created_at=self.created_at.isoformat(),
            updated_at=self.updated_at.isoformat(),
            uses=self.uses,
        )

    def line(self) -> MemoryLine:
        return MemoryLine(self.memory_id, self.content, self.tier, self.updated_at, tuple(self.tags))


def _tags_text(tags: list[str]) -> str:
    clean = [t.strip().replace("|", "/") for t in tags if t.strip()]
    return ("|" + "|".join(dict.fromkeys(clean)) + "|") if clean else ""


@dataclass(frozen=True)
class _Scored:
    """A candidate row and its text score (higher is better)."""

    row: Any
    score: float

    def __getattr__(self, name: str) -> Any:
        return getattr(self.row, name)


# What a candidate carries into the fusion and the answer.
_COLUMNS = [
    memories.c.memory_id,
    memories.c.content,
    memories.c.tier,
    memories.c.tags,
    memories.c.uses,
    memories.c.created_at,
    memories.c.updated_at,
]


# Document frequencies on PostgreSQL (MemoryEngine._doc_frequencies), one array in the terms' order. One
# statement text whatever the number of terms, so asyncpg prepares it once per connection, and its plan is
# the same generic or custom (primary-key lookups). The fallback quotes the term as scoring.tsquery does.
_PG_DOC_FREQUENCIES = text(
    "SELECT array_agg(CASE cardinality(l.lexemes) "
    "WHEN 0 THEN 0 "
    "WHEN 1 THEN coalesce((SELECT least(d.docs, :cap) FROM memory_terms d "
    "WHERE d.scope_key = :k AND d.lexeme = l.lexemes[1]), 0) "
    f"ELSE (SELECT count(*) FROM (SELECT 1 FROM memories WHERE {SCOPED_SEARCH} @@ (CAST(:sk AS tsquery) && "
    "to_tsquery('english', '''' || replace(t.term, '''', '''''') || '''')) LIMIT :cap) AS h) "
    "END ORDER BY t.i) "
    "FROM unnest(CAST(:terms AS text[])) WITH ORDINALITY AS t(term, i), "
    "LATERAL (SELECT tsvector_to_array(to_tsvector('english', t.term)) AS lexemes) AS l"
)


def _scope_lexeme(scope: Scope) -> str:
    """The tsquery text of the scope's key, as SCOPED_SEARCH indexes it beside the words."""
    return "'" + scope.key.replace("'", "''") + "'"


def memory_id_for(scope: Scope, session_id: str, run_id: str, call_id: str) -> str:
    """Stable across retries of one call; unique across scopes, sessions and runs (a model's call ids repeat
    from one run to the next, and a session id may be reused by another organisation's client)."""
    material = f"memory/{scope.key}/{session_id}/{run_id}/{call_id}"
    return "mem_" + uuid.uuid5(uuid.NAMESPACE_URL, material).hex[:20]


class MemoryEngine:
    """SQL-backed memories with full-text ranking fused with recency."""

    def __init__(
        self, store: Store, policy: MemoryPolicy | None = None, *, http: httpx.AsyncClient | None = None
    ) -> None:
        self.store = store
        self.policy = policy or MemoryPolicy()
        # Semantic recall when an embeddings endpoint is configured (and an HTTP client given to reach it).
        self.embedder: Embedder | None = None
        self.vectors = VectorIndex(self.policy.vector_cache_mb * 2**20)
        if self.policy.embeddings is not None and http is not None:
            self.embedder = Embedder(self.policy.embeddings, http)

    async def _embed(self, text_: str) -> dict[str, Any]:
        """The columns that carry ``text_``'s embedding: both NULL without an endpoint or when it fails (the
        memory is kept either way; only full text will find it)."""
        if self.embedder is None:
            return {}
        try:
            (vector,) = await self.embedder.embed([text_])
        except EmbeddingsUnavailable as exc:
            log.warning("memory saved without an embedding: %s", exc)
            return {"embedding": None, "embedding_model": None}
        return {"embedding": vector, "embedding_model": self.embedder.model}

    # ---- visibility -----------------------------------------------------------------------------------

    def live(self, now: datetime) -> ColumnElement[bool]:
        """Not deleted and not past its tier's retention."""
        c = memories.c
        working = and_(c.tier == "working", c.last_used_at >= now - timedelta(days=self.policy.working_ttl_days))
        if self.policy.long_term_ttl_days is None:
            long_term = c.tier == "long_term"
        else:
            long_term = and_(
                c.tier == "long_term", c.last_used_at >= now - timedelta(days=self.policy.long_term_ttl_days)
            )
        return and_(c.deleted_at.is_(None), or_(working, long_term))

    def _is_live(self, row: Any, now: datetime) -> bool:
        if row.deleted_at is not None:
            return False
        ttl = self.policy.working_ttl_days if row.tier == "working" else self.policy.long_term_ttl_days
        return ttl is None or aware(row.last_used_at) >= now - timedelta(days=ttl)

    # ---- writes -------------------------------------------------------------------------------------

    async def save(
        self, scope: Scope, content: str, *, tier: Tier, tags: list[str], call_key: str, memory_id: str
    ) -> tuple[str, Memory]:
        """Save a fact; ``("created", m)`` or ``("existing", m)`` when the same fact is already saved."""
        content, tags = clean_text(content), [clean_text(t) for t in tags]
        vector = await self._embed(content)
        now = utc_now()
        digest = scoring.content_hash(content)

        def write(conn: Connection) -> tuple[str, Memory]:
            self._purge(conn, scope, now)
            fitted = self._scope_sized(conn, scope, vector)
            # Locked (PostgreSQL; SQLite runs one writer at a time): concurrent saves of one fact take turns.
            row = self._by_hash(conn, scope, digest, lock=True)
            if row is None:
                upsert_rows(
                    conn,
                    memories,
                    [
                        {
                            "memory_id": memory_id,
                            **scope.columns(),
                            "content": content,
                            "content_hash": digest,
                            "tier": tier,
                            "tags": _tags_text(tags),
                            "uses": 1,
                            "last_call": call_key,
                            "created_by_call": call_key,
                            "created_at": now,
                            "updated_at": now,
                            "last_used_at": now,
                            "deleted_at": None,
                            "embedding": fitted.get("embedding"),
                            "embedding_model": fitted.get("embedding_model"),
                        }
                    ],
                    keys=["scope_key", "content_hash"],
                )
                row = self._by_hash(conn, scope, digest, lock=True)
                assert row is not None
                # Another call saved it at the same moment: this save is then a use of it (below).
            if row.created_by_call == call_key:
                return "created", Memory.of(row)  # this call saved it (or a retry of the call that did)
            if not self._is_live(row, now):
                # Deleted or expired: saving it again brings it back as a new memory.
                self._saved_again(
                    conn,
                    row.seq,
                    call_key,
                    now,
                    content=content,
                    tier=tier,
                    tags=_tags_text(tags),
                    uses=1,
                    created_by_call=call_key,
                    created_at=now,
                    deleted_at=None,
                    **fitted,
                )
                return "created", Memory.of(self._by_hash(conn, scope, digest))
            if row.last_call != call_key:
                # Saved again: it matters, so count the use, refresh it and promote it when it has earned it.
                merged = [t for t in (row.tags or "").split("|") if t] + tags
                counted = self._count_save(
                    conn,
                    row.seq,
                    call_key,
                    now,
                    tier=tier,
                    tags=_tags_text(merged),
                    # A vector of the model configured now (the row may predate it, or the endpoint).
                    **{k: v for k, v in fitted.items() if v is not None},
                )
                row = counted if counted is not None else self._by_hash(conn, scope, digest)
            return "existing", Memory.of(row)

        return await self.store.run(write)

    def _scope_sized(
        self, conn: Connection, scope: Scope, vector: dict[str, Any], seq: int | None = None
    ) -> dict[str, Any]:
        """``vector`` if its size is the one the scope's vectors of its model have (any, when it has none but
        row ``seq``'s); else none: vectors of two sizes cannot be compared, and the memory is kept without."""
        embedding, model = vector.get("embedding"), vector.get("embedding_model")
        if embedding is None:
            return vector
        c = memories.c
        others = select(func.length(c.embedding)).where(
            scope.where(), c.embedding_model == model, c.embedding.is_not(None)
        )
        if seq is not None:
            others = others.where(c.seq != seq)
        size = conn.execute(others.limit(1)).scalar()
        if size is None or int(size) == len(embedding):
            return vector
        log.warning(
            "memory saved without an embedding: %s answers %d dimensions where this scope's vectors have %d "
            "(give the new size a new model name)",
            model,
            len(embedding) // 4,
            int(size) // 4,
        )
        return {"embedding": None, "embedding_model": None}

    def _count_save(
        self, conn: Connection, seq: int, call_key: str, now: datetime, *, tier: Tier, **values: Any
    ) -> Any | None:
        """One more use of row ``seq`` by ``call_key``, counted in the store (``uses = uses + 1``), so that no
        concurrent save is lost; the row as it is now, or None when this call's use is counted already."""
        c = memories.c
        promoted = (
            "long_term"
            if tier == "long_term"
            else case((c.uses + 1 >= self.policy.promote_after_uses, "long_term"), else_=c.tier)
        )
        return conn.execute(
            update(memories)
            .where(c.seq == seq, or_(c.last_call.is_(None), c.last_call != call_key))
            .values(uses=c.uses + 1, tier=promoted, last_call=call_key, updated_at=now, last_used_at=now, **values)
            .returning(*memories.c)
        ).first()

    @staticmethod
    def _saved_again(conn: Connection, seq: int, call_key: str, now: datetime, **values: Any) -> None:
        """A save of a fact the scope already holds: the row becomes this call's, used and updated now."""
        conn.execute(
            update(memories)
            .where(memories.c.seq == seq)
            .values(last_call=call_key, updated_at=now, last_used_at=now, **values)
        )

    async def update(
        self,
        scope: Scope,
        memory_id: str,
        *,
        content: str | None,
        tags: list[str] | None,
        tier: Tier | None,
    ) -> Memory:
        now = utc_now()
        c = memories.c
        content = clean_text(content) if content is not None else None
        # Embedded before the transaction (no HTTP call inside it); only written when the text changes.
        vector = await self._embed(content) if content is not None else {}
        cleaned_tags = [clean_text(t) for t in tags] if tags is not None else None

        def write(conn: Connection) -> Memory:
            row = conn.execute(select(memories).where(scope.where(), c.memory_id == memory_id)).first()
            if row is None or not self._is_live(row, now):
                raise ToolFailure(f"No memory {memory_id!r} for this agent and user (it may have been deleted).")
            values: dict[str, Any] = {"updated_at": now, "last_used_at": now}
            if content is not None and content != row.content:
                digest = scoring.content_hash(content)
                other = self._by_hash(conn, scope, digest)
                if other is not None and other.seq != row.seq:
                    if self._is_live(other, now):
                        raise ToolFailure(
                            f"Memory {other.memory_id!r} already holds this fact; delete {memory_id!r} instead."
                        )
                    conn.execute(delete(memories).where(c.seq == other.seq))
                values.update(content=content, content_hash=digest, **self._scope_sized(conn, scope, vector, row.seq))
            if cleaned_tags is not None:
                values["tags"] = _tags_text(cleaned_tags)
            if tier is not None:
                values["tier"] = tier
            conn.execute(update(memories).where(c.seq == row.seq).values(**values))
            fresh = conn.execute(select(memories).where(c.seq == row.seq)).one()
            return Memory.of(fresh)

        return await self.store.run(write)

    async def delete(self, scope: Scope, memory_id: str) -> bool:
        """Soft delete; True also when it was already deleted (a retried delete answers the same)."""
        c = memories.c

        def write(conn: Connection) -> bool:
            row = conn.execute(select(memories).where(scope.where(), c.memory_id == memory_id)).first()
            if row is None:
                return False
            if row.deleted_at is None:
                conn.execute(update(memories).where(c.seq == row.seq).values(deleted_at=utc_now()))
            return True

        return await self.store.run(write)

    def _purge(self, conn: Connection, scope: Scope, now: datetime) -> None:
        """Retention: drop rows deleted long ago and rows past their tier's time to live, in this scope."""
        c = memories.c
        gone = or_(
            c.deleted_at < now - PURGE_DELETED_AFTER,
            and_(c.tier == "working", c.last_used_at < now - timedelta(days=self.policy.working_ttl_days)),
        )
        if self.policy.long_term_ttl_days is not None:
            gone = or_(
                gone,
                and_(c.tier == "long_term", c.last_used_at < now - timedelta(days=self.policy.long_term_ttl_days)),
            )
        conn.execute(delete(memories).where(scope.where(), gone))

    def _by_hash(self, conn: Connection, scope: Scope, digest: str, *, lock: bool = False) -> Any:
        stmt = select(memories).where(scope.where(), memories.c.content_hash == digest)
        return conn.execute(stmt.with_for_update() if lock else stmt).first()

    # ---- reads --------------------------------------------------------------------------------------

    async def list_memories(
        self,
        scope: Scope,
        *,
        tier: str | None = None,
        tag: str | None = None,
        limit: int = 20,
        offset: int = 0,
        with_total: bool = True,
    ) -> tuple[list[Memory], int]:
        """A page of live memories, newest first, and how many there are in all (-1 without ``with_total``)."""
        now = utc_now()
        conds = [scope.where(), self.live(now)]
        if tier:
            conds.append(memories.c.tier == tier)
        if tag:
            conds.append(memories.c.tags.contains(f"|{tag.strip()}|", autoescape=True))
        stmt = (
            select(memories)
            .where(*conds)
            .order_by(memories.c.updated_at.desc(), memories.c.seq.desc())
            .limit(limit)
            .offset(offset)
        )
        counted = select(func.count()).select_from(memories).where(*conds)

        def read(conn: Connection) -> tuple[list[Any], int]:
            return list(conn.execute(stmt).all()), conn.execute(counted).scalar_one() if with_total else -1

        # Through Store.run: the Memory Context reads this at the start of every turn.
        rows, total = await self.store.run(read)
        return [Memory.of(r) for r in rows], int(total)

    async def search(
        self,
        scope: Scope,
        query: str,
        *,
        limit: int = 10,
        tier: str | None = None,
        use_call: str | None = None,
    ) -> list[Memory]:
        """Best matches, full-text rank fused with recency; ``use_call`` counts a use (promotion) once."""
        now = utc_now()
        terms = scoring.query_terms(query)
        if not terms:
            return []
        if self.embedder is None:
            # On a SQLite file one transaction through Store.run, whole in one worker thread (aiosqlite would
            # hop threads for every statement, which under load cost more than the queries); on PostgreSQL
            # the statements alone (see _read).
            return await self._read(lambda conn: self._search(conn, scope, terms, limit, tier, use_call, now))
        # Hybrid: the query's embedding (a round trip to the endpoint) side by side with one read of the
        # full-text candidates and the scope's cached vectors (refreshed); the product over those in a thread;
        # then one more read takes the nearest rows, fuses and counts the uses.
        model = self.embedder.model
        embedding = asyncio.ensure_future(self._embed_query(query))

        def first(conn: Connection) -> tuple[list[Any], Snapshot | None]:
            rows = self._candidates(conn, scope, terms, tier, now)
            return rows, self.vectors.cached(conn, scope.where(), scope.key, model)

        try:
            text_rows, snap = await self._read(first)
            if snap is None:  # a scope's first search, or one too large to cache
                snap = await self.store.run(lambda conn: self.vectors.snapshot(conn, scope.where(), scope.key, model))
        except BaseException:
            embedding.cancel()
            raise
        query_vector = await embedding
        floor = self.embedder.endpoint.min_similarity
        fetch = scoring.CANDIDATES + scoring.CANDIDATES // 4
        ranked = None
        if query_vector is not None and snap is not None:
            # Numpy over the scope's vectors in a thread of its own: on PostgreSQL the statements run on the
            # event loop's thread, which must not stall on it.
            ranked = await asyncio.to_thread(VectorIndex.rank, snap, query_vector, fetch, floor)

        def second(conn: Connection) -> list[Memory]:
            near = None
            if query_vector is not None:
                near = self._nearest(conn, scope, tier, now, (snap, model, query_vector, floor), fetch, ranked)
            return self._search(conn, scope, terms, limit, tier, use_call, now, text_rows, near)

        # Without a snapshot the vectors are scanned in the store, streamed: that needs a transaction.
        return await (self._read(second) if snap is not None or query_vector is None else self.store.run(second))

    def _nearest(
        self,
        conn: Connection,
        scope: Scope,
        tier: str | None,
        now: datetime,
        vectors: tuple[Snapshot | None, str, bytes, float],
        fetch: int,
        ranked: list[tuple[int, float]] | None,
    ) -> list[Any]:
        """The memories nearest to the query by meaning (cosine at least the floor), best first, live and of
        ``tier``: the ``fetch`` nearest rows (``ranked`` when given), and when too few of them pass those
        checks, more, as for full text. From the cached vectors, or scanned in the store without them."""
        snap, model, query_vector, floor = vectors
        want = scoring.CANDIDATES
        while True:
            if ranked is None:
                ranked = (
                    VectorIndex.rank(snap, query_vector, fetch, floor)
                    if snap is not None
                    else VectorIndex.scan(conn, scope.where(), model, query_vector, fetch, floor)
                )
            if not ranked:
                return []
            out = self._rows_by_seq(conn, scope, [seq for seq, _ in ranked], tier, now)
            if len(out) >= want or len(ranked) < fetch:
                return out[:want]
            fetch *= 4
            ranked = None

    async def _embed_query(self, query: str) -> bytes | None:
        assert self.embedder is not None
        try:
            (vector,) = await self.embedder.embed([query[: scoring.MAX_EMBED_QUERY_CHARS]])
        except EmbeddingsUnavailable as exc:
            log.warning("memory search by full text only: %s", exc)
            return None
        return vector

    async def _read(self, fn: Callable[[Connection], T]) -> T:
        """Run a search's statements: through Store.run on SQLite; on PostgreSQL in autocommit.

        Every round trip to PostgreSQL costs, and a search's reads need no transaction (each statement of a
        READ COMMITTED transaction takes its own snapshot anyway); a counted use is one UPDATE, atomic by
        itself, and a retried call finds its own mark whatever happened after it. So a search is its two
        statements (three with a counted use), without BEGIN and COMMIT around them.
        """
        if self.store.dialect != "postgresql":
            return await self.store.run(fn)
        async with self.store.engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            return await conn.run_sync(fn)

    def _search(
        self,
        conn: Connection,
        scope: Scope,
        terms: list[str],
        limit: int,
        tier: str | None,
        use_call: str | None,
        now: datetime,
        text_rows: list[Any] | None = None,
        near: list[Any] | None = None,
    ) -> list[Memory]:
        rows = text_rows if text_rows is not None else self._candidates(conn, scope, terms, tier, now)
        by_id = {r.memory_id: r for r in rows}
        fused = scoring.fuse(
            [
                scoring.Candidate(
                    r.memory_id, float(r.score or 0.0), aware(r.updated_at), r.tier, scoring.coverage(terms, r.content)
                )
                for r in rows
            ],
            now,
        )
        order = [c.memory_id for c, _ in fused]
        if near is not None:
            # Hybrid: the full-text order (text rank, coverage, recency, tier) and the nearest vectors are
            # fused by reciprocal rank; a memory found both ways rises above one found either way.
            by_id.update({r.memory_id: r for r in near})
            ranked = scoring.rrf([order[: scoring.CANDIDATES], [r.memory_id for r in near]])
            order = [memory_id for memory_id, _ in ranked]
        found = [Memory.of(by_id[i]) for i in order[:limit]]
        if use_call and found:
            ids = [m.memory_id for m in found]
            # Reported as counted: a retried call (counted already, so not again) answers exactly what its
            # first attempt did, uses and tier included. The UPDATE returns the rows it counted; only those it
            # did not (a retry's) are read again.
            fresh = {r.memory_id: r for r in self._count_use(conn, scope, ids, use_call, now)}
            missing = [i for i in ids if i not in fresh]
            if missing:
                stmt = select(*_COLUMNS).where(scope.where(), memories.c.memory_id.in_(missing))
                fresh.update((r.memory_id, r) for r in conn.execute(stmt))
            found = [Memory.of(fresh[i]) for i in ids if i in fresh]
        return found

    def _candidates(
        self, conn: Connection, scope: Scope, terms: list[str], tier: str | None, now: datetime
    ) -> list[Any]:
        """Full-text candidates, see :mod:`agent_tools.contracts._memory.scoring` and docs/design-notes.md.

        Ranking every match of a word that most memories contain costs tens of milliseconds at 100,000
        memories and adds almost nothing (its IDF is near zero). So each term's document frequency in the
        scope is counted (one statement, each count stopping at :data:`scoring.COMMON_DF`), and the ranked
        query takes the rarest terms whose matches together stay within :data:`scoring.RANK_BUDGET`: the
        database ranks a bounded set. The other terms count through ``coverage`` in :func:`scoring.fuse`.
        When every term is that common, the most recent matches are the candidates.
        """
        sqlite = conn.dialect.name == "sqlite"
        frequencies = self._doc_frequencies(conn, scope, terms, sqlite)
        ranked_terms = scoring.rank_terms(frequencies)
        common = [t for t, df in frequencies.items() if df >= scoring.COMMON_DF]
        if not ranked_terms and not common:
            return []
        ranked = bool(ranked_terms)
        use = ranked_terms or common
        want = scoring.CANDIDATES if ranked else scoring.COMMON_POOL
        if not sqlite:
            return self._pg_candidates(conn, scope, use, ranked, want, tier, now)
        # SQLite: the LIMIT goes inside the FTS5 query, so bm25 ranks (or rowid order streams) in the index
        # and only the best rows are joined to the table; liveness and tier are then checked on those
        # candidates. Rows that fail the check (deleted, expired, another tier) are few, so the index query
        # over-fetches, and asks again for more only when too few survived and the index had more.
        fetch = want + want // 4
        while True:
            rows, exhausted = self._sqlite_candidates(conn, scope, use, ranked, fetch, tier, now)
            if len(rows) >= want or exhausted:
                return rows[:want]
            fetch *= 4

    def _sqlite_candidates(
        self, conn: Connection, scope: Scope, use: list[str], ranked: bool, fetch: int, tier: str | None, now: datetime
    ) -> tuple[list[Any], bool]:
        """The best ``fetch`` index hits that are live (and of ``tier``), best first; and whether the index
        had no more hits than that."""
        # bm25: lower is better; weight 0 for the scope column so only the text ranks. Without ranked terms,
        # rowid order (newest first) streams straight from the FTS index, no sort of every match.
        # (Not "ORDER BY -rowid": an expression is sorted, where "rowid DESC" is the index's own order.)
        rank, order = ("bm25(memories_fts, 0.0, 1.0)", "2") if ranked else ("0.0", "rowid DESC")
        hits = (
            text(
                f"SELECT rowid AS seq, {rank} AS rank FROM memories_fts WHERE memories_fts MATCH :q "
                f"ORDER BY {order} LIMIT :n"
            )
            .bindparams(q=scoring.fts5_query(scope.key, use), n=fetch)
            .columns(column("seq", Integer), column("rank", Float))
            .subquery("hits")
        )
        c = memories.c
        keep = [c.seq == hits.c.seq, scope.where(), self.live(now)]
        if tier:
            keep.append(c.tier == tier)
        # A LEFT JOIN with the checks in ON: every hit comes back (so we know whether the index ran out), the
        # ones that failed a check without a memory_id. SQLite materialises the hits and looks each row up by
        # its rowid (with a plain IN list it walks the scope's index instead).
        stmt = (
            select(hits.c.rank, *_COLUMNS)
            .select_from(hits.outerjoin(memories, and_(*keep)))
            .order_by(hits.c.rank if ranked else hits.c.seq.desc())
        )
        rows = list(conn.execute(stmt).all())
        # The score the fusion reads: higher is better (bm25 is lower-is-better), 0 when unranked.
        out = [_Scored(r, -float(r.rank) if ranked else 0.0) for r in rows if r.memory_id is not None]
        return out, len(rows) < fetch

    def _rows_by_seq(
        self, conn: Connection, scope: Scope, seqs: list[int], tier: str | None, now: datetime
    ) -> list[Any]:
        """The rows of ``seqs`` that are in the scope, live and of ``tier``, in the order of ``seqs``."""
        c = memories.c
        checks = [scope.where(), self.live(now)] + ([c.tier == tier] if tier else [])
        if conn.dialect.name == "sqlite":
            # The ids as the left side of a LEFT JOIN, as for full-text hits: with "seq IN (...) AND
            # scope_key = ?" SQLite walks every memory of the scope's index.
            ids = (
                text("SELECT value AS seq FROM json_each(:ids)")
                .bindparams(ids=json.dumps(seqs))
                .columns(column("seq", Integer))
                .subquery("near")
            )
            stmt = select(*_COLUMNS, c.seq).select_from(ids.outerjoin(memories, and_(c.seq == ids.c.seq, *checks)))
        else:
            stmt = select(*_COLUMNS, c.seq).where(c.seq.in_(seqs), *checks)
        rows = {r.seq: r for r in conn.execute(stmt) if r.memory_id is not None}
        return [rows[seq] for seq in seqs if seq in rows]

    def _pg_candidates(
        self, conn: Connection, scope: Scope, use: list[str], ranked: bool, want: int, tier: str | None, now: datetime
    ) -> list[Any]:
        # Imported here: a worker on SQLite never loads the PostgreSQL dialect.
        from sqlalchemy.dialects.postgresql import TSQUERY

        c = memories.c
        query = func.to_tsquery("english", scoring.tsquery(use))
        if ranked:
            # The tsquery comes from a scalar subquery (an InitPlan, computed once per execution): a generic
            # plan, which PostgreSQL may use for a statement asyncpg prepared, would otherwise parse it again
            # for every row it ranks. This plan needs no selectivity: the GIN index is its only way in.
            once = select(query).scalar_subquery()
            # The matches of the ranked terms are bounded (rank_terms, and this LIMIT as the hard stop): GIN
            # finds them, ts_rank_cd ranks only those, and the best `want` go to the fusion. Liveness and tier
            # are checked on the same heap rows (free here, unlike SQLite's index-only hits).
            # SCOPED_SEARCH: "this scope AND any of the words" in the GIN index, so other scopes' matches are
            # never read. The rows are then checked by the scope's four parts, which no index covers, not by
            # scope_key: a generic plan would AND the matches with the scope's whole index.
            scoped = cast(_scope_lexeme(scope), TSQUERY).op("&&")(once)
            conds = [literal_column(SCOPED_SEARCH).op("@@")(scoped), scope.owner(), self.live(now)]
            if tier:
                conds.append(c.tier == tier)
            bounded = (
                select(*_COLUMNS, literal_column("memories.search").label("search"))
                .where(*conds)
                .limit(scoring.rank_bound())
                .subquery("bounded")
            )
            score = func.ts_rank_cd(bounded.c.search, once)
            stmt = (
                select(*[bounded.c[col.name] for col in _COLUMNS], score.label("score"))
                .order_by(score.desc())
                .limit(want)
            )
        else:
            stmt = (
                select(*_COLUMNS, literal_column("0.0").label("score"))
                # The bare column, which no index covers: every word here is in at least COMMON_DF memories, so
                # walking the scope's newest rows finds matches soon, and no plan may take every match from the
                # GIN index to sort them. The call stays inline (unlike the ranked query's): the planner needs
                # the words' selectivity to choose that walk.
                .where(literal_column("memories.search").op("@@")(query), scope.where(), self.live(now))
                # The scope's newest first, along ix_memories_scope_updated (ordered by seq, the walk would go
                # through every newer row of other scopes).
                .order_by(c.updated_at.desc())
                .limit(want)
            )
            if tier:
                stmt = stmt.where(c.tier == tier)
        return list(conn.execute(stmt).all())

    def _doc_frequencies(self, conn: Connection, scope: Scope, terms: list[str], sqlite: bool) -> dict[str, int]:
        """Memories in the scope holding each term, up to COMMON_DF.

        One statement for all the terms: one round trip, however long the query. SQLite counts matches in
        its FTS5 index, each count stopping at the cap. PostgreSQL reads them from memory_terms, which its
        triggers keep exact: a term that is one lexeme (``to_tsvector`` of it, the normalisation
        ``to_tsquery`` applies) is one primary-key lookup, where counting cost a GIN scan of all its matches
        and a heap visit per counted row; a term of several lexemes (``a_b``, a phrase) is counted as before,
        and one of none (a stop word) matches nothing."""
        if not sqlite:
            lookup = {"k": scope.key, "sk": _scope_lexeme(scope), "terms": terms, "cap": scoring.COMMON_DF}
            (counts,) = conn.execute(_PG_DOC_FREQUENCIES, lookup).one()
            return {term: int(n) for term, n in zip(terms, counts, strict=True)}
        params: dict[str, Any] = {"cap": scoring.COMMON_DF}
        parts = []
        for i, term in enumerate(terms):
            params[f"q{i}"] = scoring.fts5_query(scope.key, [term])
            parts.append(
                f"(SELECT count(*) FROM (SELECT rowid FROM memories_fts WHERE memories_fts MATCH :q{i} LIMIT :cap))"
            )
        row = conn.execute(text("SELECT " + ", ".join(parts)).bindparams(**params)).one()
        return {term: int(row[i]) for i, term in enumerate(terms)}

    def _count_use(self, conn: Connection, scope: Scope, ids: list[str], call_key: str, now: datetime) -> list[Any]:
        """Count a use of ``ids`` by ``call_key`` (once per call); the rows counted, as they are now."""
        c = memories.c
        return list(
            conn.execute(
                update(memories)
                .where(
                    scope.where(),
                    c.memory_id.in_(ids),
                    or_(c.last_call.is_(None), c.last_call != call_key),
                )
                .values(
                    uses=c.uses + 1,
                    last_used_at=now,
                    last_call=call_key,
                    tier=case((c.uses + 1 >= self.policy.promote_after_uses, "long_term"), else_=c.tier),
                )
                .returning(*_COLUMNS)
            )
        )

    async def context(self, scope: Scope, query: str, limit: int) -> list[Memory]:
        """The Memory Context selection: most relevant to ``query``, topped up with the latest memories."""
        if limit <= 0:
            return []
        # The latest first: a scope without memories (most sessions' first turns) costs this one query.
        recent, _ = await self.list_memories(scope, limit=limit, with_total=False)
        if not recent:
            return []
        found = await self.search(scope, query, limit=limit) if query.strip() else []
        seen = {m.memory_id for m in found}
        found += [m for m in recent if m.memory_id not in seen][: max(0, limit - len(found))]
        return found
