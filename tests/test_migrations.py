"""Schema migrations on SQLite and PostgreSQL: the revisions build what the tables declare, a new database is
created and stamped, a database from before migrations is stamped at the baseline, workers starting together
on PostgreSQL do not race."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agent_tools._store.db import Store, load_metadata
from agent_tools._store.migrations import BASELINE, alembic_config, include_object
from agent_tools._store.transcript_rows import HEAD


def test_head_names_the_newest_revision() -> None:
    # A new revision must move HEAD too: stores at the old head would otherwise skip their upgrade.
    assert ScriptDirectory.from_config(alembic_config()).get_current_head() == HEAD


@pytest_asyncio.fixture
async def empty_engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    """An engine on an empty database: a new SQLite file, or a new PostgreSQL schema on the search path."""
    if not store_url.startswith("postgresql"):
        engine = create_async_engine(store_url)
        yield engine
        await engine.dispose()
        return
    schema = f"mig_{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(store_url)
    async with admin.begin() as conn:
        await conn.execute(text(f"CREATE SCHEMA {schema}"))
    engine = create_async_engine(store_url, connect_args={"server_settings": {"search_path": schema}})
    try:
        yield engine
    finally:
        await engine.dispose()
        async with admin.begin() as conn:
            await conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        await admin.dispose()


def _differences(conn: Connection) -> list[Any]:
    context = MigrationContext.configure(conn, opts={"include_object": include_object, "compare_type": True})
    return list(compare_metadata(context, load_metadata()))


def _version(conn: Connection) -> str | None:
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    return str(row[0]) if row else None


async def test_revisions_build_what_the_tables_declare(empty_engine: AsyncEngine) -> None:
    """The guard for every schema change: change the tables without a revision and this fails."""

    def upgrade(conn: Connection) -> None:
        cfg = alembic_config(conn)
        command.upgrade(cfg, "head")

    async with empty_engine.begin() as conn:
        await conn.run_sync(upgrade)
    async with empty_engine.connect() as conn:
        assert await conn.run_sync(_differences) == []
        assert await conn.run_sync(_version) == HEAD
        # The undeclared full-text objects are there too.
        if conn.dialect.name == "sqlite":
            tables = await conn.run_sync(lambda c: inspect(c).get_table_names())
            assert "memories_fts" in tables
        else:
            columns = await conn.run_sync(lambda c: [col["name"] for col in inspect(c).get_columns("memories")])
            assert "search" in columns


async def test_a_new_database_is_created_and_stamped(empty_engine: AsyncEngine) -> None:
    store = Store(str(empty_engine.url), engine=empty_engine)
    assert await store.create_schema() == "created"
    assert await store.create_schema() == "current"  # the next worker start: nothing to do
    async with empty_engine.connect() as conn:
        assert await conn.run_sync(_version) == HEAD
        assert await conn.run_sync(_differences) == []
        # The stamp was written without Alembic: Alembic reads it as its own, and has nothing to upgrade.
        assert await conn.run_sync(lambda c: MigrationContext.configure(c).get_current_revision()) == HEAD
    async with empty_engine.begin() as conn:
        await conn.run_sync(lambda c: command.upgrade(alembic_config(c), "head"))
        assert await conn.run_sync(_version) == HEAD


def test_a_new_database_is_created_without_loading_alembic(tmp_path: Path) -> None:
    """Alembic (15 MiB) stays in a process once imported: a worker on a new store must not import it."""
    import subprocess
    import sys

    code = (
        "import asyncio, sys\n"
        "from agent_tools._store.db import Store\n"
        "async def main():\n"
        "    s = Store(sys.argv[1])\n"
        "    print(await s.create_schema(), 'alembic' in sys.modules)\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
    )
    url = f"sqlite+aiosqlite:///{tmp_path}/new.sqlite"
    out = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["created", "False"], out.stderr[-2000:]


async def test_a_database_from_before_migrations_is_stamped_and_keeps_its_rows(empty_engine: AsyncEngine) -> None:
    def baseline(conn: Any) -> None:
        # What create_schema made before migrations existed: the baseline's schema, without alembic_version.
        from alembic import command

        from agent_tools._store.migrations import alembic_config

        command.upgrade(alembic_config(conn), BASELINE)
        conn.execute(text("DROP TABLE alembic_version"))

    async with empty_engine.begin() as conn:
        await conn.run_sync(baseline)
        await conn.execute(
            text(
                "INSERT INTO sessions (session_id, agent, organisation, project, user_id, title, root_id, depth,"
                " created_at) VALUES ('s-old', 'a', 'o', 'p', 'u', 't', 's-old', 0, CURRENT_TIMESTAMP)"
            )
        )
    store = Store(str(empty_engine.url), engine=empty_engine)
    assert await store.create_schema() == "stamped-baseline"
    async with empty_engine.connect() as conn:
        assert await conn.run_sync(_version) == HEAD
        assert (await conn.execute(text("SELECT session_id FROM sessions"))).scalar_one() == "s-old"
    assert BASELINE <= (HEAD or "")


# PostgreSQL only: it is where several workers share one database (SQLite is the embedded single-worker store).
@pytest.mark.parametrize("store_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
async def test_workers_starting_together_create_the_schema_once(empty_engine: AsyncEngine) -> None:
    stores = [Store(str(empty_engine.url), engine=empty_engine) for _ in range(4)]
    done = await asyncio.gather(*(s.create_schema() for s in stores))
    assert sorted(done) == ["created", "current", "current", "current"]


def test_processes_starting_together_on_a_new_sqlite_file_create_it_once(tmp_path: Path) -> None:
    """Two worker processes (and a CLI) on one new SQLite file: one creates the tables, the others find them.

    Without the lock file one of them failed with "table sessions already exists"."""
    import subprocess
    import sys

    url = f"sqlite+aiosqlite:///{tmp_path}/new.sqlite"
    code = (
        "import asyncio, sys\n"
        "from agent_tools._store.db import Store\n"
        "async def main():\n"
        "    s = Store(sys.argv[1])\n"
        "    print(await s.create_schema())\n"
        "    await s.close()\n"
        "asyncio.run(main())\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in results]
    assert sorted(out.strip() for out, _ in results) == ["created", "current", "current"]
