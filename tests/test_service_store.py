"""The service's one store: the event ingress, the web tools' cache, the transcripts and the readiness probe
read through one engine, so that a service process holds one pool of connections to the database, not one per
router, and gives them back when it stops."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from sqlalchemy import make_url, text
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.testing import WorkflowEnvironment

from agent_tools._service.app import create_app
from agent_tools._service.app_client import app_client
from agent_tools._settings import Settings
from agent_tools._store.db import Store
from agent_tools.contracts._events.settings import EventSettings
from agent_tools.contracts._service import ServiceSettings
from agent_tools.contracts._web.config import WebConfig
from tests.support.asgi import served
from tests.support.events import TOKEN
from tests.support.polling import eventually
from tests.support.postgres import database_of_its_own
from tests.support.session_api import FULL, KEYS, auth

pytestmark = pytest.mark.postgres


@pytest_asyncio.fixture
async def own_database(postgres_database: str) -> AsyncIterator[str]:
    """A database of this test's own, with the store's schema: its connections are the service's alone (the
    ``postgres_database`` one serves every test of this process)."""
    async with database_of_its_own(postgres_database, "agent_tools_service") as url:
        made = Store(url)
        await made.create_schema()
        await made.close()
        yield url


async def _connections(url: str) -> int:
    """The connections open to ``url``'s database, counted from another database."""
    target = make_url(url)
    admin = create_async_engine(target.set(database="postgres"))
    try:
        async with admin.connect() as conn:
            found = await conn.execute(
                text("SELECT count(*) FROM pg_stat_activity WHERE datname = :name"), {"name": target.database}
            )
            return int(found.scalar_one())
    finally:
        await admin.dispose()


async def test_every_route_reads_through_one_pool_and_gives_it_back_at_the_end(
    temporal_env: WorkflowEnvironment, settings: Settings, own_database: str
) -> None:
    configured = settings.model_copy(
        update={
            "database_url": own_database,
            "service": ServiceSettings(api_keys=KEYS),
            "events": EventSettings(tokens={"acme/one-store": TOKEN}),
            "web": WebConfig(search_engines=[], api_keys=[FULL]),
        }
    )
    app = create_app(configured, temporal=temporal_env.client)
    async with served(app, timeout=30) as http:
        posted = await http.post(
            "/v1/events", json={"kind": "ci.done", "payload": {}}, headers={"Authorization": f"Bearer {TOKEN}"}
        )
        assert posted.status_code == 202, posted.text
        # The transcript route's read (the route itself first finds there is no such session).
        client = await app_client(app.state, configured)
        assert await client.session("s-none").transcript() == []
        # No engine to ask: refused, after the web tools opened their cache's store.
        searched = await http.post("/v1/tools/search", json={"query": "trams"}, headers=auth(FULL))
        assert searched.status_code >= 400 and app.state.web is not None, searched.text
        assert (await http.get("/readyz")).status_code == 200
        assert client.shared_store() is app.state.shared_store
        # One after another, the four readers took the same one connection (three engines held three).
        assert await _connections(own_database) == 1

    async def closed() -> bool:
        return await _connections(own_database) == 0

    await eventually(closed, timeout=10, what="the service's connections closed with it")
