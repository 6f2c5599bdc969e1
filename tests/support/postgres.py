"""Where the tests' PostgreSQL is: ``AGENT_TOOLS_TEST_POSTGRES_URL``, else the local server's ``test``
database (each test that uses it gets a database of its own from the ``postgres_database`` fixture)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator

POSTGRES_URL = os.environ.get("AGENT_TOOLS_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


@contextlib.asynccontextmanager
async def database_of_its_own(base_url: str, prefix: str) -> AsyncIterator[str]:
    """A new database on ``base_url``'s server, named ``prefix`` and a random suffix, dropped at the end
    (``WITH (FORCE)``: engines a test left open must not keep it alive)."""
    from sqlalchemy import make_url, text
    from sqlalchemy.ext.asyncio import create_async_engine

    base = make_url(base_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()
