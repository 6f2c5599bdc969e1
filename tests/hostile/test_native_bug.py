"""A bug in a workflow-native tool (any exception) is a tool error for the model and a log line, never a
workflow task that fails for ever."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools.workflows._planning import PlanningPart
from tests.support.fixture_types import WorkerFor
from tests.support.hostile import task_failures


async def test_an_exception_in_a_native_tool_becomes_a_tool_error(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: Any, args: Any, call: Any) -> Any:
        raise KeyError("a bug in todoWrite")

    # Each run binds its planning part's handlers when it starts: the session calls the patched method.
    monkeypatch.setattr(PlanningPart, "_tool_todo_write", broken)
    settings.model = script(
        [{"tool_calls": [{"name": "todoWrite", "arguments": {"todos": []}}]}, {"say": "after: {{last_tool}}"}]
    )
    async with worker_for() as client:
        handle = await client.start_session("plan", tools=["todoWrite"])
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == SessionStatus.completed
        assert result.final_message == "after: Tool todoWrite failed: KeyError: 'a bug in todoWrite'"
        assert await task_failures(client.temporal, handle.id) == []
