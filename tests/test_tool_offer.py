"""Which tools an agent is offered, seen where the model sees them: the tool list
and the system messages of the request a real session sends to an OpenAI-compatible endpoint on 127.0.0.1,
on the dev server."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from agent_tools._agents import AgentDefinition
from agent_tools._catalog import ToolCatalog, ToolLevel
from agent_tools._catalog.profiles import FYAI_ASSIGNED, PROFILES
from agent_tools._settings import DEFAULT_PRICES, ProviderEndpoint, Settings, WebConfig
from tests.support.fake_llm import FakeLLMServer, fake_llm_server, openai_reply
from tests.support.fixture_types import WorkerFor
from tests.support.web import WebServer

READERS = ["read_tool_result", "search_tool_result", "query_tool_result"]


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with fake_llm_server() as server:
        yield server


def _on_endpoint(settings: Settings, llm: FakeLLMServer) -> None:
    settings.providers = {"local": ProviderEndpoint(kind="openai", base_url=llm.base_url, api_key="k")}
    settings.model = "local:m"
    settings.prices = {}


async def _first_request(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor, agent: AgentDefinition, **start: Any
) -> dict[str, Any]:
    """The body of the first model request of a session of ``agent``."""
    llm.queue(openai_reply("ok"))
    _on_endpoint(settings, llm)
    async with worker_for(agents=[agent]) as client:
        await (await client.start_session("hi", agent=agent.name, **start)).result()
    body: dict[str, Any] = llm.requests[0]["body"]
    return body


def _names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def _system(body: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")


async def test_automatic_tools_join_an_agent_with_its_own_tools_and_memory_on(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """Item 1: FYAI's remember/recall (Memory ticked) and the three readers (at least one tool) are attached
    without being assigned."""
    agent = AgentDefinition(name="own", profile=None, tools=["todoWrite"], memory=True)
    names = _names(await _first_request(llm, settings, worker_for, agent))
    assert sorted(names) == sorted(["todoWrite", "remember", "recall", *READERS])


async def test_fyai_profile_does_not_hand_out_assign_only_tools(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """Item 1: search_conversation_history, wait_for_event, hand_off_to_agent and invoke_sub_agent come only
    when assigned; an agent with no tool of its own gets no readers (nothing could spill)."""
    bare = AgentDefinition(name="bare", profile="fyai", memory=True)
    assert sorted(_names(await _first_request(llm, settings, worker_for, bare))) == ["recall", "remember"]


async def test_fyai_assigned_tool_brings_the_readers_and_memory_off_drops_remember(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    agent = AgentDefinition(name="waiter", profile="fyai", tools=["wait_for_event"], memory=False)
    names = _names(await _first_request(llm, settings, worker_for, agent))
    assert sorted(names) == sorted(["wait_for_event", *READERS])


async def test_memory_tools_are_announced_in_the_system_message_without_any_memory(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """Item 2: with Memory on and no memory stored yet (so no Memory Context block), the system message still
    tells the agent that its memory tools exist; with Memory off it says nothing about them."""
    on = AgentDefinition(name="mem", profile="fyai", memory=True)
    system = _system(await _first_request(llm, settings, worker_for, on))
    assert "Memory Context" not in system
    assert "long-term memory" in system and "remember" in system and "recall" in system
    llm.requests.clear()
    off = AgentDefinition(name="nomem", profile="rtc", memory=False)
    assert "long-term memory" not in _system(await _first_request(llm, settings, worker_for, off))


async def test_tool_level_none_offers_no_executed_tool(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """Item 3: codai's `none` disables every executed tool, read_artifact, memory and delegation included."""
    settings.model_tiers = {"small": "local:small"}  # two callable models: delegate_to_model would qualify
    agent = AgentDefinition(name="none", profile="codai", tool_level=ToolLevel.none)
    assert _names(await _first_request(llm, settings, worker_for, agent)) == []


def test_level_none_keeps_the_tools_of_documents_without_levels() -> None:
    """RTC and FYAI have no tool levels: their tools stay at `none`; every codai face is gone."""
    catalog = ToolCatalog.builtin()
    names = catalog.offer(profile="all", level=ToolLevel.none, memory=True)
    assert not set(names) & set(PROFILES["codai"])
    assert {"todoWrite", "askUser", "remember", *FYAI_ASSIGNED} <= set(names)


async def test_delegate_to_model_needs_two_callable_models(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """Item 4: the default price table (OpenAI and Anthropic rows, no keys) does not make a model callable;
    a second configured tier does."""
    agent = AgentDefinition(name="coder", profile="codai")
    _on_endpoint(settings, llm)
    settings.openai_api_key = settings.anthropic_api_key = None
    settings.prices = dict(DEFAULT_PRICES)
    llm.queue(openai_reply("ok"), openai_reply("ok"))
    async with worker_for(agents=[agent]) as client:
        await (await client.start_session("hi", agent="coder")).result()
    assert "delegate_to_model" not in _names(llm.requests[0]["body"])

    two = settings.model_copy(update={"model_tiers": {"small": "local:small"}})
    async with worker_for(agents=[agent], settings=two) as client:
        await (await client.start_session("hi", agent="coder")).result()
    assert "delegate_to_model" in _names(llm.requests[1]["body"])


async def test_web_tools_only_when_the_server_has_search_and_fetch(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """Item 6: no search engine configured: no webSearch, web_search or web_fetch (codai ties both to search);
    fetching switched off: no webFetch."""
    settings.web = WebConfig(search_engines=[], fetch_enabled=True)
    agent = AgentDefinition(name="surfer", profile="all")
    names = _names(await _first_request(llm, settings, worker_for, agent))
    assert "webFetch" in names and "http_fetch" in names
    assert not {"webSearch", "web_search", "web_fetch"} & set(names)

    llm.requests.clear()
    with WebServer() as engine:
        settings.web = WebConfig(search_engines=["searxng"], searxng_url=engine.url("/searx"), fetch_enabled=False)
        names = _names(await _first_request(llm, settings, worker_for, agent))
    assert "webSearch" in names and "web_search" in names
    assert not {"webFetch", "web_fetch"} & set(names)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_web_tools_only_while_a_configured_engine_answers(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor, caplog: pytest.LogCaptureFixture
) -> None:
    """RTC registers webSearch only where search is configured; a configured engine the worker cannot
    reach (an offline deployment's DuckDuckGo) does not count: the worker's probe finds it down, the four
    web faces are not offered, and the log says why. A real engine on 127.0.0.1 answering: all four."""
    agent = AgentDefinition(name="surfer", profile="all")
    web_faces = {"webSearch", "webFetch", "web_search", "web_fetch"}
    with WebServer() as engine:
        settings.web = WebConfig(search_engines=["searxng"], searxng_url=engine.url("/searx"))
        names = _names(await _first_request(llm, settings, worker_for, agent))
        assert engine.hits("/searx/") >= 1  # the probe asked the engine itself
    assert web_faces <= set(names)

    llm.requests.clear()
    dead = f"http://127.0.0.1:{_closed_port()}"
    settings.web = WebConfig(search_engines=["searxng", "bing"], searxng_url=dead, bing_url=f"{dead}/search")
    with caplog.at_level(logging.WARNING, logger="agent_tools._web.probe"):
        names = _names(await _first_request(llm, settings, worker_for, agent))
    assert not web_faces & set(names)
    assert "http_fetch" in names and "todoWrite" in names
    [warning] = [r.getMessage() for r in caplog.records if r.name == "agent_tools._web.probe"]
    assert "webSearch, web_search, web_fetch, webFetch are not offered" in warning
    assert "searxng: connection failed" in warning and "bing: connection failed" in warning


def test_automatic_chip_is_listed() -> None:
    """Item 1: where tools are listed, an automatic tool says so (the CLI's `tools` command and the docs)."""
    from typer.testing import CliRunner

    from agent_tools._cli import app

    out = CliRunner().invoke(app, ["tools", "--profile", "fyai"])
    assert out.exit_code == 0, out.output
    rows = {line.split()[0]: line for line in out.output.splitlines() if line.strip()}
    assert "automatic" in rows["remember"] and "automatic" in rows["read_tool_result"]
    assert "assign" in rows["invoke_sub_agent"] and "automatic" not in rows["invoke_sub_agent"]


async def test_spawn_agent_stays_out_when_the_request_brings_its_own_tools(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """Item 5: codai injects spawn_agent "only when the request carries no client-side tools of its own". A
    request whose tool list names one of the host's own tools owns the loop: no spawn_agent, even named."""
    from agent_tools._user_tools import tool

    @tool(description="The caller's own tool")
    async def lookup(q: str) -> str:
        return q

    _on_endpoint(settings, llm)
    coder = AgentDefinition(name="coder", profile="codai")
    llm.queue(openai_reply("ok"), openai_reply("ok"), openai_reply("ok"))
    async with worker_for(agents=[coder], tools=[lookup]) as client:
        await (await client.start_session("a", agent="coder")).result()
        await (await client.start_session("b", agent="coder", tools=["spawn_agent", "todoWrite"])).result()
        await (await client.start_session("c", agent="coder", tools=["lookup", "spawn_agent"])).result()
    profile, builtin_list, own_tools = (_names(r["body"]) for r in llm.requests)
    assert "spawn_agent" in profile and "spawn_agent" in builtin_list
    assert "lookup" in own_tools and "spawn_agent" not in own_tools


async def test_create_loop_states_the_interval_floor_the_session_enforces(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """The createLoop schema the model is sent names the shortest interval the session accepts: 5 s by
    default, the session's `loop_min_interval_seconds` where set (2.5 s reads as 3: the field is whole
    seconds). The caps RTC does not set are named too: goals and loops' turns, todos' items."""
    agent = AgentDefinition(name="planner", profile="rtc")

    def schema(body: dict[str, Any], tool: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = [
            t["function"]["parameters"] for t in body["tools"] if t["function"]["name"] == tool
        ]
        assert len(found) == 1
        return found[0]

    body = await _first_request(llm, settings, worker_for, agent)
    assert schema(body, "createLoop")["properties"]["interval_seconds"]["minimum"] == 5
    assert schema(body, "createGoal")["properties"]["max_turns"]["maximum"] == 200
    assert schema(body, "todoWrite")["properties"]["todos"]["maxItems"] == 100
    for floor, stated in ((30, 30), (2.5, 3)):
        llm.requests.clear()
        body = await _first_request(llm, settings, worker_for, agent, options={"loop_min_interval_seconds": floor})
        assert schema(body, "createLoop")["properties"]["interval_seconds"]["minimum"] == stated


async def test_a_request_tool_list_keeps_the_agents_own_dialect(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """A request that names its tools replaces the agent's list, not its platform: the faces that come
    without being named (memory with Memory on, a reader for saved results) are the agent's profile's.
    A codai agent keeps memory_* and read_artifact, not FYAI's remember/recall/read_tool_result; an RTC
    agent keeps RTC's memory tools (and FYAI's readers, RTC having none); an agent without a profile is
    built as FYAI builds one."""
    coder = AgentDefinition(name="coder", profile="codai", memory=True)
    names = set(_names(await _first_request(llm, settings, worker_for, coder, tools=["json_query", "todoWrite"])))
    assert {"json_query", "todoWrite", "memory_recall", "memory_remember", "read_artifact"} <= names
    assert not {"remember", "recall", *READERS} & names
    assert not {"http_fetch", "spawn_agent"} & names  # the request's list replaced the profile's tools

    llm.requests.clear()
    rtc = AgentDefinition(name="planner", profile="rtc", memory=True)
    names = set(_names(await _first_request(llm, settings, worker_for, rtc, tools=["todoWrite"])))
    assert {"todoWrite", "saveMemory", "searchMemory", *READERS} <= names
    assert not {"remember", "recall", "memory_recall", "askUser"} & names

    llm.requests.clear()
    plain = AgentDefinition(name="plain", profile=None, memory=True)
    names = set(_names(await _first_request(llm, settings, worker_for, plain, tools=["todoWrite"])))
    assert names == {"todoWrite", "remember", "recall", *READERS}

    llm.requests.clear()
    forgetful = AgentDefinition(name="forgetful", profile="codai", memory=False)
    names = set(_names(await _first_request(llm, settings, worker_for, forgetful, tools=["json_query"])))
    assert names == {"json_query", "read_artifact"}
