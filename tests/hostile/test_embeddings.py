"""The memories' embedding column (``embedding``, ``embedding_model``) is fed by an outside endpoint: every
answer that is not an embedding (an error status, not JSON, NaN, strings, the wrong count, too many
dimensions, a zero vector, a nested object, a flood of bytes) is refused where it enters. The memory is
kept without a vector, nothing non-finite reaches the store, and recall answers by full text. Both stores."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest
import pytest_asyncio
from sqlalchemy import select

from agent_tools._agents import AgentDefinition, AgentRegistry
from agent_tools._settings import Settings
from agent_tools._store.memory_tables import memories
from agent_tools.activities._memory import Scope
from agent_tools.activities._services import Services
from agent_tools.contracts._memory.settings import EmbeddingsEndpoint, MemoryPolicy
from bench import embeddings_server as fake_embeddings
from bench.embeddings_server import EmbeddingsServer, embeddings_server
from tests.support.memory import call, ref

MODES = ["status500", "not_json", "nan", "strings", "wrong_count", "huge", "zero", "nested", "flood"]


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    with embeddings_server() as s:
        yield s


@pytest_asyncio.fixture
async def services(store_url: str, server: EmbeddingsServer) -> AsyncIterator[Services]:
    settings = Settings(
        database_url=store_url,
        agents_file=None,
        model=None,
        openai_api_key=None,
        anthropic_api_key=None,
        memory=MemoryPolicy(embeddings=EmbeddingsEndpoint(base_url=server.base_url, model="fake-embed")),
    )
    s = await Services.open(settings, agents=AgentRegistry([AgentDefinition(name="assistant")]))
    try:
        yield s
    finally:
        await s.close()


@pytest.mark.parametrize("mode", MODES)
async def test_an_endpoint_answer_that_is_not_an_embedding_never_reaches_the_store(
    mode: str, services: Services, server: EmbeddingsServer
) -> None:
    r = ref()
    server.mode = mode
    saved = await call(services, r, "saveMemory", {"content": "Alice drives an automobile to work"})
    assert not saved.is_error, saved.content
    found = await call(services, r, "searchMemory", {"query": "automobile"})
    assert not found.is_error and len(json.loads(found.content)["memories"]) == 1
    updated = await call(
        services, r, "updateMemory", {"memory_id": json.loads(saved.content)["memory"]["memory_id"], "content": "x y"}
    )
    assert not updated.is_error, updated.content
    async with services.store.engine.connect() as conn:
        row = (
            await conn.execute(select(memories.c.embedding, memories.c.embedding_model).where(Scope.of(r).where()))
        ).one()
    assert row.embedding is None and row.embedding_model is None
    # And a good answer after the bad ones is stored finite and unit length.
    server.mode = "ok"
    await call(services, r, "saveMemory", {"content": "Bob rents a vehicle"})
    async with services.store.engine.connect() as conn:
        vectors = (
            await conn.execute(
                select(memories.c.embedding).where(Scope.of(r).where(), memories.c.embedding.is_not(None))
            )
        ).all()
    assert len(vectors) == 1
    v = np.frombuffer(vectors[0].embedding, dtype="<f4")
    assert np.all(np.isfinite(v)) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-5


async def test_a_dimension_change_in_a_scope_is_refused_and_the_memory_kept(
    services: Services, server: EmbeddingsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = ref()
    assert not (await call(services, r, "saveMemory", {"content": "Alice drives an automobile to work"})).is_error
    # The endpoint now answers vectors of another size under the same model name (a model swapped behind it;
    # a configured size of its own is recorded as another model, ``fake-embed@32``).
    monkeypatch.setattr(fake_embeddings, "DIMENSIONS", 32)
    saved = await call(services, r, "saveMemory", {"content": "Bob rents a vehicle on weekends"})
    assert not saved.is_error, saved.content
    bob = json.loads(saved.content)["memory"]["memory_id"]
    # An update's new vector of the other size is refused too; full-text recall still finds the memory.
    assert not (await call(services, r, "updateMemory", {"memory_id": bob, "content": "Bob rents a van"})).is_error
    found = await call(services, r, "searchMemory", {"query": "van"})
    assert not found.is_error and len(json.loads(found.content)["memories"]) == 1
    monkeypatch.setattr(fake_embeddings, "DIMENSIONS", 256)
    assert not (await call(services, r, "saveMemory", {"content": "Carol cycles to the office"})).is_error
    async with services.store.engine.connect() as conn:
        rows = (await conn.execute(select(memories.c.content, memories.c.embedding).where(Scope.of(r).where()))).all()
    sizes = {row.content: (len(row.embedding) // 4 if row.embedding is not None else None) for row in rows}
    # One size of vector per scope and model: the other size is refused, its memories kept without one.
    assert sizes == {
        "Alice drives an automobile to work": 256,
        "Bob rents a van": None,
        "Carol cycles to the office": 256,
    }
