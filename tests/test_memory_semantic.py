"""Semantic recall on SQLite and PostgreSQL (store_url): embeddings from a local server that speaks the
OpenAI /v1/embeddings wire format, fused with full text by reciprocal rank; without an endpoint recall stays
full-text."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import select

from agent_tools._agents import AgentDefinition, AgentRegistry
from agent_tools._settings import Settings
from agent_tools._store.memory_tables import memories
from agent_tools.activities._memory import Scope
from agent_tools.activities._services import Services
from agent_tools.contracts._memory import scoring
from agent_tools.contracts._memory.settings import EmbeddingsEndpoint, MemoryPolicy
from bench.embeddings_server import EmbeddingsServer, embeddings_server
from tests.support.memory import call, open_services, ref


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    with embeddings_server() as s:
        yield s


async def _open(url: str, endpoint: EmbeddingsEndpoint | None) -> Services:
    settings = Settings(
        database_url=url,
        agents_file=None,
        model=None,
        openai_api_key=None,
        anthropic_api_key=None,
        memory=MemoryPolicy(embeddings=endpoint),
    )
    return await Services.open(settings, agents=AgentRegistry([AgentDefinition(name="assistant")]))


@pytest_asyncio.fixture
async def services(store_url: str, server: EmbeddingsServer) -> AsyncIterator[Services]:
    endpoint = EmbeddingsEndpoint(base_url=server.base_url, model="fake-embed", api_key="sk-test")
    s = await _open(store_url, endpoint)
    try:
        yield s
    finally:
        await s.close()


def _ids(out: Any) -> list[str]:
    assert not out.is_error, out.content
    return [m["memory_id"] for m in json.loads(out.content)["memories"]]


async def _save(services: Services, r: Any, content: str, **extra: Any) -> str:
    out = await call(services, r, "saveMemory", {"content": content, **extra})
    assert not out.is_error, out.content
    return str(json.loads(out.content)["memory"]["memory_id"])


async def test_recall_finds_by_meaning_and_stays_in_scope(services: Services, server: EmbeddingsServer) -> None:
    r = ref()
    car = await _save(services, r, "Alice drives an automobile to work")
    await _save(services, r, "The coffee machine is on the third floor")
    elsewhere = ref(user="someone-else", organisation=r.organisation)
    await _save(services, elsewhere, "Bob parks his automobile downstairs")
    # No word in common with "car": only the embedding finds it, and nothing of the other user's scope.
    assert _ids(await call(services, r, "searchMemory", {"query": "car"})) == [car]
    text = (await call(services, r, "memory_recall", {"query": "which car"})).content
    assert "automobile" in text and "Bob" not in text
    # The wire format: model, input, the key as a bearer token.
    request = server.requests[-1]
    assert request["path"] == "/v1/embeddings" and request["body"]["model"] == "fake-embed"
    assert request["body"]["input"] == ["which car"] and request["auth"] == "Bearer sk-test"
    # Unrelated meaning stays below the similarity floor: no match rather than the nearest anything.
    assert _ids(await call(services, r, "searchMemory", {"query": "quarterly tax"})) == []


async def test_a_memory_found_both_ways_ranks_first(services: Services) -> None:
    r = ref()
    both = await _save(services, r, "Invoices are paid by bank transfer")
    words_only = await _save(services, r, "The transfer of the office is planned for May")
    meaning_only = await _save(services, r, "Billing is monthly")
    found = _ids(await call(services, r, "searchMemory", {"query": "invoice transfer"}))
    assert found[0] == both and set(found) == {both, words_only, meaning_only}


async def test_deleted_updated_and_tier_filtered_memories(services: Services) -> None:
    """The vector index is a cache: a deleted memory is not returned, an updated one is found by its new
    meaning only, and the tier filter applies to vector candidates too."""
    r = ref()
    engine = services.memory
    scope = Scope.of(r)
    first = await _save(services, r, "Alice drives an automobile to work")
    assert [m.memory_id for m in await engine.search(scope, "car")] == [first]
    out = await call(services, r, "updateMemory", {"memory_id": first, "content": "Alice drinks espresso at work"})
    assert not out.is_error, out.content
    assert await engine.search(scope, "car") == []
    assert [m.memory_id for m in await engine.search(scope, "tea")] == [first]
    working = await _save(services, r, "Bob rents a vehicle this week", tier="working")
    assert [m.memory_id for m in await engine.search(scope, "car", tier="working")] == [working]
    assert await engine.search(scope, "car", tier="long_term") == []
    await call(services, r, "deleteMemory", {"memory_id": working})
    assert await engine.search(scope, "car") == []


async def test_without_an_endpoint_recall_stays_full_text(store_url: str) -> None:
    async with open_services(store_url, [AgentDefinition(name="assistant")]) as services:
        r = ref()
        await _save(services, r, "Alice drives an automobile to work")
        assert _ids(await call(services, r, "searchMemory", {"query": "car"})) == []
        assert len(_ids(await call(services, r, "searchMemory", {"query": "automobile"}))) == 1
        async with services.store.engine.connect() as conn:
            row = (
                await conn.execute(select(memories.c.embedding, memories.c.embedding_model).where(Scope.of(r).where()))
            ).one()
        assert row.embedding is None and row.embedding_model is None


def test_a_worker_without_semantic_search_does_not_load_numpy(tmp_path: Path) -> None:
    """numpy (12 MiB of a worker's resident memory) is loaded by the first vector handled, not by the worker's
    imports, its services or a full-text save and recall."""
    code = (
        "import asyncio, sys\n"
        "import agent_tools._plugin, agent_tools._worker\n"
        "from agent_tools._agents import AgentDefinition\n"
        "from tests.support.memory import call, open_services, ref\n"
        "async def main():\n"
        "    async with open_services(sys.argv[1], [AgentDefinition(name='assistant')]) as services:\n"
        "        r = ref()\n"
        "        await call(services, r, 'saveMemory', {'content': 'Alice drives an automobile'})\n"
        "        found = await call(services, r, 'searchMemory', {'query': 'automobile'})\n"
        "        print(found.is_error, found.content.count('memory_id'), 'numpy' in sys.modules)\n"
        "asyncio.run(main())\n"
    )
    url = f"sqlite+aiosqlite:///{tmp_path}/store.sqlite"
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        [sys.executable, "-c", code, url], capture_output=True, text=True, timeout=120, check=False, cwd=root
    )
    assert out.stdout.split() == ["False", "1", "False"], out.stdout + out.stderr[-2000:]


async def test_an_endpoint_that_is_down_costs_no_memory_and_no_recall(
    services: Services, server: EmbeddingsServer
) -> None:
    r = ref()
    server.mode = "status500"
    saved = await _save(services, r, "Alice drives an automobile to work")
    assert _ids(await call(services, r, "searchMemory", {"query": "automobile"})) == [saved]  # full text
    server.mode = "ok"
    assert _ids(await call(services, r, "searchMemory", {"query": "car"})) == []  # it has no vector
    # Saving the same fact again, with the endpoint back, gives it one.
    await _save(services, r, "Alice drives an automobile to work")
    assert _ids(await call(services, r, "searchMemory", {"query": "car"})) == [saved]


async def test_vectors_are_stored_unit_length_with_their_model(services: Services, server: EmbeddingsServer) -> None:
    import numpy as np

    r = ref()
    await _save(services, r, "Alice drives an automobile to work")
    async with services.store.engine.connect() as conn:
        row = (
            await conn.execute(select(memories.c.embedding, memories.c.embedding_model).where(Scope.of(r).where()))
        ).one()
    vector = np.frombuffer(row.embedding, dtype="<f4")
    assert row.embedding_model == "fake-embed" and vector.shape == (256,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5


def test_embeddings_are_configured_in_the_memory_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOLS_MEMORY__EMBEDDINGS__BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("AGENT_TOOLS_MEMORY__EMBEDDINGS__MODEL", "text-embedding-3-small")
    monkeypatch.setenv("AGENT_TOOLS_MEMORY__EMBEDDINGS__DIMENSIONS", "512")
    endpoint = Settings(agents_file=None).memory.embeddings
    assert endpoint is not None and endpoint.model == "text-embedding-3-small" and endpoint.dimensions == 512
    assert Settings(agents_file=None, memory=MemoryPolicy()).memory.embeddings is None


def test_reciprocal_rank_fusion() -> None:
    fused = scoring.rrf([["a", "b", "c"], ["c", "d"]])
    assert [i for i, _ in fused] == ["c", "a", "b", "d"]  # b and d tie (second place), by id
    assert fused[0][1] == pytest.approx(1 / 63 + 1 / 61)


@pytest.mark.parametrize(
    "values",
    [[], [float("nan"), 1.0], [0.0, 0.0], ["0.1"], [True, 1.0], [1.0] * 5000, [float("inf")], None, {"a": 1}],
)
def test_an_embedding_that_is_not_one_is_refused(values: Any) -> None:
    with pytest.raises(ValueError):
        scoring.encode_vector(values, 4096)


async def test_concurrent_searches_and_saves_share_one_vector_index(services: Services) -> None:
    """Searches run in several worker threads at once while saves land: each answers as a lone search
    would, and the index holds every vector once."""
    import asyncio

    r = ref()
    engine = services.memory
    scope = Scope.of(r)
    ids = [await _save(services, r, f"Alice drives an automobile number {i}") for i in range(5)]
    alone = [m.memory_id for m in await engine.search(scope, "car")]
    assert sorted(alone) == sorted(ids)
    more = [f"Bob drives an automobile number {i}" for i in range(5)]
    results = await asyncio.gather(
        *(engine.search(scope, "car") for _ in range(8)), *(_save(services, r, text) for text in more)
    )
    for found in results[:8]:
        assert isinstance(found, list) and set(ids) <= {m.memory_id for m in found}
    final = [m.memory_id for m in await engine.search(scope, "car", limit=10)]
    assert len(final) == len(set(final)) == 10
    (entry,) = [e for (key, _), e in engine.vectors._scopes.items() if key == scope.key]
    seqs = [int(s) for _, block in entry.blocks for s in block]
    assert len(seqs) == len(set(seqs)) == 10
