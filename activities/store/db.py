"""Engine, schema creation and the dialect-aware upsert every store module uses."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from activities.store.tables import metadata
from agent_tools.modules import present_modules

# Capability modules that add tables to ``metadata``; imported before create_all so one call makes all.
TABLE_MODULES: tuple[str, ...] = (
    "activities.store.memory_tables",
    "activities.store.web_tables",
    "activities.store.event_tables",
)


def _load_table_modules() -> None:
    present_modules(TABLE_MODULES)


class Store:
    """One database: an async engine plus schema management."""

    def __init__(self, url: str, *, engine: AsyncEngine | None = None) -> None:
        self.url = url
        self.engine = engine or _make_engine(url)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    async def create_schema(self) -> None:
        _load_table_modules()
        async with self.engine.begin() as conn:
            await conn.run_sync(metadata.create_all)
            if self.dialect == "sqlite":
                await _create_sqlite_extras(conn)

    async def drop_schema(self) -> None:
        _load_table_modules()
        async with self.engine.begin() as conn:
            await conn.run_sync(metadata.drop_all)

    async def close(self) -> None:
        await self.engine.dispose()


def _make_engine(url: str) -> AsyncEngine:
    if url.startswith("sqlite"):
        # WAL lets readers (client, CLI) and the worker share the file; the timeout rides out writer bursts.
        # Pooled connections: opening one per query costs more than the query (PRAGMAs, file open).
        if ":memory:" in url:
            engine = create_async_engine(url, connect_args={"timeout": 30}, poolclass=NullPool)
        else:
            # No rollback when a connection returns to the pool: every write here runs in an explicit
            # transaction, and reads open none, so the reset would be one more round trip for nothing.
            engine = create_async_engine(
                url, connect_args={"timeout": 30}, pool_size=8, max_overflow=8, pool_reset_on_return=None
            )
        from sqlalchemy import event

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    # No pre-ping: it costs a round trip (a transaction begun and rolled back) on every checkout, which
    # measured as an eighth of a worker's activity CPU. A connection that died is recycled after 30 minutes
    # or fails its query once, and Temporal retries that activity.
    return create_async_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=False, pool_recycle=1800)


async def _create_sqlite_extras(conn: AsyncConnection) -> None:
    """Hook for SQLite-only objects (FTS5 tables) that capability modules register."""
    for module in present_modules(TABLE_MODULES):
        hook = getattr(module, "create_sqlite_extras", None)
        if hook is not None:
            await hook(conn)


async def upsert(
    conn: AsyncConnection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    keys: Sequence[str],
    update: Sequence[str] | None = None,
) -> None:
    """Insert rows; on a key conflict update ``update`` columns, or do nothing when it is None.

    Activities retry; every write that a retry may repeat goes through here so that it stays idempotent.
    """
    if not rows:
        return
    stmt = _upsert_statement(conn.dialect.name, table, tuple(keys), tuple(update) if update else None)
    # Rows go as parameters of one cached statement (executemany), so SQLAlchemy compiles it once.
    await conn.execute(stmt, [dict(r) for r in rows])


@functools.cache
def _upsert_statement(dialect: str, table: Table, keys: tuple[str, ...], update: tuple[str, ...] | None) -> Any:
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt: Any = pg_insert(table)
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(table)
    else:  # pragma: no cover - only the two supported dialects reach here
        raise NotImplementedError(dialect)
    if update:
        return stmt.on_conflict_do_update(
            index_elements=list(keys), set_={c: getattr(stmt.excluded, c) for c in update}
        )
    return stmt.on_conflict_do_nothing(index_elements=list(keys))
