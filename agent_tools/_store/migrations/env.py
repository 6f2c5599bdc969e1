"""Alembic's environment: the connection comes from Store.create_schema (``config.attributes``), or, for the
``alembic`` command line, from AGENT_TOOLS_DATABASE_URL through its own async driver."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from agent_tools._store.db import load_metadata
from agent_tools._store.migrations import include_object


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=load_metadata(),
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters tables by copying them
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


given = context.config.attributes.get("connection")
if given is not None:
    run(given)
else:
    # The command line: the deployment's database through its own async driver (no second driver needed).
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    from agent_tools._settings import Settings

    async def main() -> None:
        engine = create_async_engine(Settings().database_url)
        async with engine.begin() as conn:
            await conn.run_sync(run)
        await engine.dispose()

    asyncio.run(main())
