"""search_conversation_history over the stored transcript, on SQLite and PostgreSQL (store_url)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from agent_tools._messages import Message
from agent_tools.activities._services import Services
from tests.support.memory import call, open_services, ref


@pytest_asyncio.fixture
async def services(store_url: str) -> AsyncIterator[Services]:
    async with open_services(store_url) as s:
        yield s


CONVERSATION = [
    Message(role="system", content="You are helpful. Decisions are final."),
    Message(role="user", content="Let's pick a database. I think PostgreSQL is the right DATABASE for us."),
    Message(role="assistant", content="Agreed: we will use PostgreSQL 16 for the billing service."),
    Message(role="user", content="And the queue?"),
    Message(role="assistant", content="For the queue we decided on Redis streams, not Kafka."),
    Message(role="tool", content="x" * 2000 + " postgresql appears deep inside a long tool result " + "y" * 2000),
]


async def _search(services: Services, r: Any, **args: Any) -> Any:
    out = await call(services, r, "search_conversation_history", args)
    assert not out.is_error, out.content
    return json.loads(out.content)


async def test_search_finds_messages_newest_first(services: Services) -> None:
    r = ref()
    await services.transcripts.append(r.session_id, 0, CONVERSATION)
    found = await _search(services, r, query="postgresql")
    assert [m["position"] for m in found["matches"]] == [5, 2, 1]
    assert found["matches"][1]["role"] == "assistant" and "PostgreSQL 16" in found["matches"][1]["snippet"]
    # A long message gives a snippet around the match, not the whole message.
    deep = found["matches"][0]["snippet"]
    assert "postgresql appears deep" in deep and len(deep) <= 306 and deep.startswith("...")


async def test_role_filter_and_limit(services: Services) -> None:
    r = ref()
    await services.transcripts.append(r.session_id, 0, CONVERSATION)
    users = await _search(services, r, query="database", role="user")
    assert [m["position"] for m in users["matches"]] == [1]
    assert (await _search(services, r, query="decisions", role="system"))["matches"][0]["position"] == 0
    assert len((await _search(services, r, query="e", limit=2))["matches"]) == 2
    bad = await call(services, r, "search_conversation_history", {"query": "x", "role": "tool"})
    assert bad.is_error


async def test_all_words_fallback_and_no_match(services: Services) -> None:
    r = ref()
    await services.transcripts.append(r.session_id, 0, CONVERSATION)
    found = await _search(services, r, query="decided queue")  # not a phrase in any message
    assert [m["position"] for m in found["matches"]] == [4]
    none = await _search(services, r, query="mongodb")
    assert none["matches"] == [] and "No earlier message" in none["note"]
    # Literal search: LIKE wildcards in the query are plain characters.
    assert (await _search(services, r, query="%"))["matches"] == []


async def test_only_the_current_session(services: Services) -> None:
    r = ref()
    other = ref()
    await services.transcripts.append(r.session_id, 0, CONVERSATION)
    await services.transcripts.append(other.session_id, 0, [Message(role="user", content="nothing here")])
    assert (await _search(services, other, query="postgresql"))["matches"] == []
