"""The host's own ``@tool`` functions, registered on the plugin, are offered to its agents by default (the
README's worker snippet), an agent narrows them with ``exclude_tools``, and a request's list is the offer."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._agents import AgentDefinition
from agent_tools._session import SessionStatus
from agent_tools._settings import ProviderEndpoint, Settings
from agent_tools._user_tools import tool
from tests.support.fake_llm import FakeLLMServer, fake_llm_server, openai_reply
from tests.support.fixture_types import Script, WorkerFor
from tests.support.terminal import cli_env


@tool
async def exchange_rate(base: str, quote: str = "EUR") -> str:
    """Exchange rate between two currencies."""
    return f"1 {base} = 0.92 {quote}"


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with fake_llm_server() as server:
        yield server


async def test_the_default_agent_calls_a_tool_registered_on_the_plugin(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"say": "", "tool_calls": [{"name": "exchange_rate", "arguments": {"base": "USD"}}]},
            {"say": "Today {{last_tool}}."},
        ]
    )
    async with worker_for(tools=[exchange_rate]) as client:
        result = await client.run("How many euros is a dollar?")
    assert result.status == SessionStatus.completed
    assert result.final_message == "Today 1 USD = 0.92 EUR."


async def _offered(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor, agent: AgentDefinition, **start: Any
) -> list[str]:
    llm.queue(openai_reply("ok"))
    settings.providers = {"local": ProviderEndpoint(kind="openai", base_url=llm.base_url, api_key="k")}
    settings.model = "local:m"
    settings.prices = {}
    async with worker_for(tools=[exchange_rate], agents=[agent]) as client:
        await (await client.start_session("hi", agent=agent.name, **start)).result()
    body: dict[str, Any] = llm.requests[-1]["body"]
    return [t["function"]["name"] for t in body.get("tools", [])]


@pytest.mark.parametrize("profile", ["rtc", "fyai", "codai", None])
async def test_every_profile_is_offered_the_host_tools(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor, profile: str | None
) -> None:
    agent = AgentDefinition(name="a", profile=profile, tools=["todoWrite"] if profile is None else [])
    assert "exchange_rate" in await _offered(llm, settings, worker_for, agent)


async def test_an_agent_narrows_the_host_tools_and_a_request_list_is_the_offer(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    narrowed = AgentDefinition(name="a", profile="rtc", exclude_tools=["exchange_rate"])
    assert "exchange_rate" not in await _offered(llm, settings, worker_for, narrowed)
    listed = await _offered(llm, settings, worker_for, AgentDefinition(name="a", profile="rtc"), tools=["todoWrite"])
    assert "exchange_rate" not in listed and "todoWrite" in listed


async def test_run_with_tool_offers_exactly_the_tools_named(
    llm: FakeLLMServer, settings: Settings, temporal_env: WorkflowEnvironment, worker_for: WorkerFor
) -> None:
    from typer.testing import CliRunner

    from agent_tools._cli import app

    llm.queue(openai_reply("done"))
    settings.providers = {"local": ProviderEndpoint(kind="openai", base_url=llm.base_url, api_key="k")}
    settings.model = "local:m"
    settings.prices = {}
    env = cli_env(temporal_env, settings)
    async with worker_for(tools=[exchange_rate]):
        out = await asyncio.to_thread(
            CliRunner().invoke, app, ["run", "go", "--tool", "exchange_rate", "--tool", "todoWrite"], env=env
        )
    assert out.exit_code == 0, out.output
    assert "1 model call, " in out.output  # one call, in the singular
    offered = [t["function"]["name"] for t in llm.requests[-1]["body"].get("tools", [])]
    assert offered[:2] == ["exchange_rate", "todoWrite"], offered
    assert "webSearch" not in offered and "askUser" not in offered
