"""Engine, schema creation and the dialect-aware upsert every store module uses."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, MetaData, Table, create_engine, event, make_url, text

from agent_tools._errors import StoreNotReady
from agent_tools._store.tables import metadata

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

T = TypeVar("T")


class Store:
    """One database and schema management, with :meth:`run` for whole transactions.

    A SQLite file is served by a synchronous engine whose transactions run whole in a worker thread; other
    databases (PostgreSQL, an in-memory SQLite) by an async engine. The async engine is made on first use:
    ``sqlalchemy.ext.asyncio`` imports SQLAlchemy's ORM, and with aiosqlite it took 5.6 MB of a worker's RSS
    (``bench/overhead.py``), which a worker on a SQLite file then never loads.
    """

    def __init__(self, url: str, *, engine: AsyncEngine | None = None) -> None:
        self.url = url
        self._engine = engine
        # A SQLite file gets a synchronous engine whose transactions run whole in a worker thread:
        # aiosqlite hands every cursor, statement and commit to its thread and back (seven trips for a
        # model step's write), where one trip per transaction is enough (docs/benchmarks.md).
        self._sync: Engine | None = None
        self._threads: ThreadPoolExecutor | None = None
        if engine is None and _is_sqlite_file(url):
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

    async def create_schema(self) -> str:
        """Create the schema, or migrate it to the newest revision (see :mod:`agent_tools._store.migrations`).

        Returns what was done: "current", "created", "upgraded" or "stamped-baseline".
        """
        from agent_tools._store.migrations import migrate

        if self._sync is not None:
            # SQLite has no advisory lock: processes starting together on a new file take a lock file
            # beside it, so one creates the tables and the others then find them ("table sessions already
            # exists" otherwise).
            return await asyncio.get_running_loop().run_in_executor(self._executor(), self._create_schema_locked)
        return await self.run(lambda conn: migrate(conn, create_all_tables))

    def _create_schema_locked(self) -> str:
        import fcntl

        from agent_tools._store.migrations import migrate

        assert self._sync is not None
        database = make_url(self.url).database
        with open(f"{database}-migrate.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with self._sync.begin() as conn:
                    return migrate(conn, create_all_tables)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    async def check_schema(self) -> None:
        """Raise :class:`StoreNotReady` unless the schema is at the revision this code expects.

        Clients (the Python client, the CLI, the HTTP service) read and write an existing store but never
        create or migrate it: that is the workers' job, or ``agent-tools migrate``'s.
        """
        from agent_tools._store.migrations import HEAD, current_revision

        revision = await self.run(current_revision)
        if revision != HEAD:
            state = "has no schema yet" if revision is None else f"is at revision {revision}, this version needs {HEAD}"
            raise StoreNotReady(
                f"the store at {_safe_url(self.url)} {state}: start a worker (`agent-tools worker`), "
                "or run `agent-tools migrate`"
            )

    @classmethod
    async def open_existing(cls, url: str) -> Store:
        """A store a worker has already created: never creates a file, a table or a migration."""
        if _is_sqlite_file(url):
            import os

            database = make_url(url).database
            if database and not await asyncio.to_thread(os.path.exists, database):
                raise StoreNotReady(
                    f"the store at {_safe_url(url)} does not exist yet: start a worker (`agent-tools worker`), "
                    "or run `agent-tools migrate`"
                )
        store = cls(url)
        try:
            await store.check_schema()
        except BaseException:
            await store.close()
            raise
        return store

    async def drop_schema(self) -> None:
        def drop(conn: Connection) -> None:
            load_metadata().drop_all(conn)
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))

        await self.run(drop)

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


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    return make_url(url).render_as_string(hide_password=True)


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


def _is_sqlite_file(url: str) -> bool:
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


def as_utc(value: datetime) -> datetime:
    """``value`` as an aware UTC time. SQLite keeps no zone: the store writes and compares every time as UTC
    and gives it back aware."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def load_metadata() -> MetaData:
    """The metadata with every capability's tables registered (each table module adds its own)."""
    # Imported here rather than at the top: event_tables uses Store from this module.
    from agent_tools._store import approval_tables, event_tables, memory_tables, web_tables  # noqa: F401

    return metadata


def create_all_tables(conn: Connection) -> None:
    """Every table of a new database, plus the SQLite-only objects (the memories' FTS5 index)."""
    from agent_tools._store import memory_tables

    load_metadata().create_all(conn)
    if conn.dialect.name == "sqlite":
        memory_tables.create_sqlite_extras(conn)


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
