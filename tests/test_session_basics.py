"""The session loop end to end on a real dev server with the scripted model."""

from __future__ import annotations

from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor


async def test_turn_runs_tools_in_parallel_and_answers(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "say": "planning",
                "tool_calls": [
                    {"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "in_progress"}]}},
                    {"name": "todoWrite", "arguments": {"todos": [{"content": "b", "status": "pending"}]}},
                ],
            },
            {"say": "done: {{tool_results}}"},
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("hello")
        result = await handle.result()
        assert result.status == SessionStatus.completed
        assert result.final_message is not None and result.final_message.startswith("done: Todo list updated")
        entries = await handle.transcript()
        assert [e.role for e in entries] == ["system", "user", "assistant", "tool", "tool", "assistant"]
        assert result.usage.calls == 2
