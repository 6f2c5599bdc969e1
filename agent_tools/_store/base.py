"""The database every store module runs its transactions on, and the helpers their rows need.

It imports no table module: the table modules import it, and :mod:`agent_tools._store.db` (the store with its
schema) imports them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, Table, create_engine, event, make_url, text

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")


class Database:
    """One database, with :meth:`run` for whole transactions; :class:`~agent_tools._store.db.Store` adds its
    schema.

    A SQLite file is served by a synchronous engine whose transactions run whole in a worker thread; other
    databases (PostgreSQL, an in-memory SQLite) by an async engine. The async engine is made on first use:
    ``sqlalchemy.ext.asyncio`` imports SQLAlchemy's ORM, which, with aiosqlite, a worker on a SQLite file then
    never loads (``tests/test_worker_setup.py``).
    """

    def __init__(self, url: str, *, engine: AsyncEngine | None = None) -> None:
        self.url = url
        self._engine = engine
        # A SQLite file gets a synchronous engine whose transactions run whole in a worker thread:
        # aiosqlite hands every cursor, statement and commit to its thread and back (seven trips for a
        # model step's write), where one trip per transaction is enough (docs/benchmarks.md).
        self._sync: Engine | None = None
        self._threads: ThreadPoolExecutor | None = None
        if engine is None and is_sqlite_file(url):
            self._sync = _make_sync_sqlite_engine(url)

    @property
    def engine(self) -> AsyncEngine:
        """The async engine (made on first use). Store code goes through :meth:`run`; this is for what needs a
        driver's own async connection (PostgreSQL's autocommit search, the benches' bulk loads)."""
        if self._engine is None:
            self._engine = _make_engine(self.url)
        return self._engine

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """Run ``fn`` with a synchronous connection inside one transaction and return what it returns.

        Every read and write of the store goes through here: on a SQLite file the transaction runs in one
        worker thread; on other databases ``fn`` runs on the async engine (``run_sync``).
        """
        if self._sync is not None:
            return await asyncio.get_running_loop().run_in_executor(self._executor(), self._in_thread, fn)
        async with self.engine.begin() as conn:
            return await conn.run_sync(fn)

    async def ping(self) -> None:
        """One round trip to the database (a readiness probe's check)."""
        await self.run(lambda conn: conn.execute(text("SELECT 1")).scalar())

    def _executor(self) -> ThreadPoolExecutor:
        # Made on first use, and again after close(): like an engine after dispose(), a closed store that
        # is used again opens what it needs (a client's transcript store read after the client closed).
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent-tools-sqlite")
        return self._threads

    def _in_thread(self, fn: Callable[[Connection], T]) -> T:
        assert self._sync is not None
        with self._sync.begin() as conn:
            return fn(conn)

    @property
    def dialect(self) -> str:
        return self._sync.dialect.name if self._sync is not None else self.engine.dialect.name

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
        sync, threads = self._sync, self._threads
        self._threads = None
        if sync is not None or threads is not None:
            # Closing the file's connections and joining the threads blocks: not on the event loop.
            await asyncio.to_thread(_close_sync, sync, threads)


def _close_sync(sync: Engine | None, threads: ThreadPoolExecutor | None) -> None:
    if threads is not None:
        threads.shutdown(wait=True)
    if sync is not None:
        sync.dispose()


def _make_engine(url: str) -> AsyncEngine:
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

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
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    # No pre-ping: it costs a round trip (a transaction begun and rolled back) on every checkout, a share of
    # every activity's CPU. A connection that died is recycled after 30 minutes
    # or fails its query once, and Temporal retries that activity.
    return create_async_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=False, pool_recycle=1800)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def is_sqlite_file(url: str) -> bool:
    u = make_url(url)
    return u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:")


def _make_sync_sqlite_engine(url: str) -> Engine:
    """The same file through the standard library's sqlite3, for :meth:`Store.run`."""
    engine = create_engine(
        make_url(url).set(drivername="sqlite"),
        # Connections move between the pool's worker threads, one thread at a time.
        connect_args={"timeout": 30, "check_same_thread": False},
        pool_size=4,
        max_overflow=4,
        pool_reset_on_return=None,
    )
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def upsert_rows(
    conn: Connection,
    table: Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    keys: Sequence[str],
    update: Sequence[str] | None = None,
) -> int:
    """Insert rows; on a key conflict update ``update`` columns, or do nothing when it is None. Returns the
    rows written: for one row without ``update``, 1 when it was new and 0 when its key existed.

    Activities retry; every write that a retry may repeat goes through here so that it stays idempotent.
    """
    if not rows:
        return 0
    stmt = _upsert_statement(conn.dialect.name, table, tuple(keys), tuple(update) if update else None)
    if len(rows) == 1:  # one row as one execution, so that the driver's count is the row's
        return int(conn.execute(stmt, dict(rows[0])).rowcount)
    # Rows go as parameters of one cached statement (executemany), so SQLAlchemy compiles it once.
    return int(conn.execute(stmt, [dict(r) for r in rows]).rowcount)


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
