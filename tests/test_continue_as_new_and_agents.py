"""Continue-as-new carries the whole state; agent definitions load from TOML with clear errors."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_tools._agents import AgentDefinition, AgentRegistry
from agent_tools._catalog.spec import ToolLevel
from agent_tools._errors import ConfigurationError
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor


async def test_continue_as_new_keeps_transcript_todos_and_usage(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"say": "", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "keep me", "status": "pending"}]}}]},
            {"say": "one"},
            {"say": "two"},
            {"say": "three {{last_user}}"},
        ]
    )  # fmt: skip
    async with worker_for() as client:
        handle = await client.start_session(
            "first", keep_alive=True, tools=["todoWrite"], options={"continue_as_new_after_turns": 1}
        )
        for text in ("second", "third"):
            for _ in range(400):
                if (await handle.status()).status == SessionStatus.idle and (await handle.status()).pending_inbox == 0:
                    break
                await asyncio.sleep(0.05)
            await handle.send(text)
        for _ in range(400):
            if (await handle.latest_message()).content == "three third":
                break
            await asyncio.sleep(0.05)
        status = await handle.status()
        assert status.turns == 3 and status.usage.calls == 4
        from agent_tools.contracts._planning import TodoItem

        todos = await handle.query("todos", list[TodoItem])
        assert [t.content for t in todos] == ["keep me"]
        runs = [wf.run_id async for wf in client.temporal.list_workflows(f"WorkflowId = '{handle.id}'")]
        assert len(runs) >= 3  # it really continued as new
        entries = await handle.transcript()
        assert [e.seq for e in entries] == list(range(len(entries)))
        assert [e.content for e in entries if e.role == "user"] == ["first", "second", "third"]
        await handle.stop()


def test_agents_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(
        """
[[agents]]
name = "researcher"
description = "Finds sources"
system_prompt = "Research carefully."
model = "openai:gpt-4.1-mini"
profile = "codai"
tools = ["todoWrite"]
subagents = ["writer"]
tool_level = "l3_sandbox"

[[agents]]
name = "writer"
project = "docs"
active = false
"""
    )
    registry = AgentRegistry.from_file(path)
    researcher = registry.get("researcher")
    assert researcher.profile == "codai" and researcher.tool_level == ToolLevel.l3_sandbox
    assert researcher.subagents == ["writer"]
    assert registry.get("writer", "docs").active is False
    assert registry.get("assistant").name == "assistant"  # the built-in default stays available
    with pytest.raises(ConfigurationError, match="unknown agent 'nobody'"):
        registry.get("nobody")


def test_bad_agent_files_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "agents.toml"
    bad.write_text("[[agents]]\nname = ''\n")
    with pytest.raises(ConfigurationError, match=r"agents\.toml"):
        AgentRegistry.from_file(bad)
    bad.write_text("[[agents\n")
    with pytest.raises(ConfigurationError):
        AgentRegistry.from_file(bad)
    with pytest.raises(ConfigurationError, match="twice"):
        AgentRegistry([AgentDefinition(name="a"), AgentDefinition(name="a")])


async def test_unknown_agent_fails_the_start_clearly(settings: Settings, worker_for: WorkerFor) -> None:
    async with worker_for() as client:
        handle = await client.start_session("x", agent="ghost")
        from temporalio.client import WorkflowFailureError

        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert "unknown agent 'ghost'" in str(info.value.cause.cause)  # type: ignore[union-attr,attr-defined]


async def test_agent_options_reach_the_session_and_the_request_wins(settings: Settings) -> None:
    from agent_tools._session import PrepareInput, SessionRequest
    from agent_tools.activities._engine import prepare_session
    from agent_tools.activities._services import Services

    agents = AgentRegistry(
        [AgentDefinition(name="helper", options={"ask_user_timeout_seconds": 60, "ask_user_default": "first"})]
    )
    services = await Services.open(settings, agents=agents)
    try:
        out = await prepare_session(
            services,
            PrepareInput(
                session_id="s-opts",
                request=SessionRequest(agent="helper", prompt="x", options={"ask_user_default": "Budget"}),
            ),
        )
    finally:
        await services.close()
    assert out.config.options.ask_user_timeout_seconds == 60
    assert out.config.options.ask_user_default == "Budget"
