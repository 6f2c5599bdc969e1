"""The README's Python snippets run as written: the client's against a worker on the dev server, with the
default (scripted demo) model, whose question it answers; the worker's, whose tool the default agent calls.
The only edits are the server's address (the snippets say localhost:7233) and a stand-in for the host's own
data converter (``my_converter``)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment

from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor

README = Path(__file__).resolve().parents[1] / "README.md"
API = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _snippet(containing: str, page: Path = README) -> str:
    blocks: list[str] = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    (found,) = [b for b in blocks if containing in b]
    return found


async def _run_snippet(code: str, names: dict[str, Any]) -> dict[str, Any]:
    """Run ``code`` as a module with top-level awaits (as an async REPL does); returns its globals."""
    compiled = compile(code, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    outcome = eval(compiled, names)  # the README's own code, on purpose
    if inspect.iscoroutine(outcome):
        await outcome
    return names


async def test_the_client_snippet_answers_the_demo_question_and_ends(
    temporal_env: WorkflowEnvironment, settings: Settings, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = temporal_env.client.service_client.config.target_host
    for key, value in {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": target,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
    }.items():
        monkeypatch.setenv(key, value)
    for key in ("AGENT_TOOLS_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    code = _snippet("AgentToolsClient.connect()")
    assert _snippet("AgentToolsClient.connect()", API) == code  # the API page's example is this one
    async with worker_for():
        found = await asyncio.wait_for(_run_snippet(code, {}), timeout=120)
    result = found["result"]
    assert result.status == SessionStatus.completed
    assert "Book first" in (result.final_message or "")


async def test_the_worker_snippet_offers_its_tool_to_the_default_agent(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_tools._client import AgentToolsClient

    target = temporal_env.client.service_client.config.target_host
    model = script(
        [{"say": "", "tool_calls": [{"name": "exchange_rate", "arguments": {"base": "USD"}}]}, {"say": "Done."}]
    )
    monkeypatch.setenv("AGENT_TOOLS_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("AGENT_TOOLS_MODEL", model)
    code = _snippet("AgentToolsPlugin(tools=[exchange_rate])").replace("localhost:7233", target)
    serving = asyncio.ensure_future(_run_snippet(code, {"my_converter": DataConverter.default}))
    try:
        client = AgentToolsClient(temporal_env.client, Settings(task_queue="agent-tools", agents_file=None))
        handle = await client.start_session("How many euros is a dollar?")
        result = await asyncio.wait_for(handle.result(), timeout=120)
        transcript = await handle.transcript()
        await client.close()
    finally:
        serving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await serving
    assert result.status == SessionStatus.completed and result.final_message == "Done."
    tool_results = [e.content for e in transcript if e.role == "tool"]
    assert tool_results and not any("Unknown tool" in t for t in tool_results), tool_results
