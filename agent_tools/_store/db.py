"""The store: the database (:mod:`.base`) with its schema, every capability's tables, created or migrated."""

from __future__ import annotations

import asyncio

from sqlalchemy import Connection, MetaData, make_url, text
from sqlalchemy.exc import DBAPIError

from agent_tools._errors import StoreNotReady
from agent_tools._store.base import Database, is_sqlite_file
from agent_tools._store.tables import metadata
from agent_tools._store.transcript_rows import HEAD, missing, not_ready


class Store(Database):
    """The database with schema management: create or migrate it (workers), or check it (clients)."""

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
        from agent_tools._store.migrations import current_revision

        revision = await self.run(current_revision)
        if revision != HEAD:
            raise not_ready(_safe_url(self.url), revision)

    @classmethod
    async def open_existing(cls, url: str) -> Store:
        """A store a worker has already created: never creates a file, a table or a migration."""
        if is_sqlite_file(url):
            import os

            database = make_url(url).database
            if database and not await asyncio.to_thread(os.path.exists, database):
                raise missing(_safe_url(url))
        store = cls(url)
        try:
            await store.check_schema()
        except UNREACHABLE as exc:
            await store.close()
            raise unreachable(url, exc) from exc
        except BaseException:
            await store.close()
            raise
        return store

    async def drop_schema(self) -> None:
        def drop(conn: Connection) -> None:
            load_metadata().drop_all(conn)
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))

        await self.run(drop)


class SharedStore:
    """The store at ``url`` a worker has created, opened on first use and shared by all that read and append
    through it in one process (one engine, one pool); an open that fails is tried again at the next use."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._store: Store | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> Store:
        """The open store. Raises: StoreNotReady: no worker has created it yet, or it cannot be reached."""
        if self._store is None:
            async with self._lock:
                if self._store is None:
                    self._store = await Store.open_existing(self.url)
        return self._store

    async def close(self) -> None:
        """Close the store if it was opened; a later :meth:`get` opens it again."""
        store, self._store = self._store, None
        if store is not None:
            await store.close()


# What a database that is down, refuses the connection, or does not exist raises through SQLAlchemy (asyncpg
# lets a refused connection's OSError through as it is).
UNREACHABLE = (OSError, DBAPIError)


def unreachable(url: str, exc: BaseException) -> StoreNotReady:
    """The error of a store a client cannot reach: where (no password) and the driver's first line (never
    the statement or its parameters)."""
    cause = getattr(exc, "orig", None) or exc
    first = (str(cause).splitlines() or [""])[0][:200]
    return StoreNotReady(f"cannot reach the store at {_safe_url(url)}: {type(cause).__name__}: {first}")


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    return make_url(url).render_as_string(hide_password=True)


def load_metadata() -> MetaData:
    """The metadata with every capability's tables registered (each table module adds its own)."""
    # Imported when a schema is made or compared: a client that only reads transcripts loads none of them.
    from agent_tools._store import approval_tables, event_tables, memory_tables, web_tables  # noqa: F401

    return metadata


def create_all_tables(conn: Connection) -> None:
    """Every table of a new database, plus the SQLite-only objects (the memories' FTS5 index)."""
    from agent_tools._store import memory_tables

    load_metadata().create_all(conn)
    if conn.dialect.name == "sqlite":
        memory_tables.create_sqlite_extras(conn)
