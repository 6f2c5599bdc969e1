"""Where the tests' PostgreSQL is: ``AGENT_TOOLS_TEST_POSTGRES_URL``, else the local server's ``test``
database (each test that uses it gets a database of its own from the ``postgres_database`` fixture)."""

from __future__ import annotations

import os

POSTGRES_URL = os.environ.get("AGENT_TOOLS_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
