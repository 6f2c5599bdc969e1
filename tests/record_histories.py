"""Record the histories that the replay test keeps checking: run each scenario on an embedded dev server
and save its history under tests/histories/.

    python -m tests.record_histories            # re-record after an intended workflow change

A changed workflow that no longer replays these histories would break running sessions on upgrade:
that is what the replay test catches. Re-record only when the change is meant to be incompatible (and
version the workflow then).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client

from agent_tools.client import AgentToolsClient
from agent_tools.devserver import start_dev_server
from agent_tools.plugin import AgentToolsPlugin
from agent_tools.settings import Settings
from agent_tools.testing import write_script
from agent_tools.user_tools import tool
from worker import build_worker

HISTORIES = Path(__file__).parent / "histories"


@tool
async def lookup(topic: str) -> str:
    """Facts about a topic."""
    return f"{topic}: facts " * 50


async def scenario_tools_in_parallel(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    model = script(
        [
            {"say": "plan", "tool_calls": [
                {"name": "todoWrite", "arguments": {"todos": [{"content": "look up", "status": "in_progress"}]}},
                {"name": "lookup", "arguments": {"topic": "temporal"}},
                {"name": "lookup", "arguments": {"topic": "agents"}},
            ]},
            {"say": "answer: {{last_tool}}"},
        ]
    )  # fmt: skip
    handle = await client.start_session(
        "research", model=model, tools=["todoWrite", "lookup"], session_id=f"replay-tools-{uuid.uuid4().hex[:6]}"
    )
    await handle.result()
    return handle.id


async def scenario_chat_with_continue_as_new(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    model = script([{"say": "one"}, {"say": "two"}, {"say": "three"}])
    handle = await client.start_session(
        "first", model=model, tools=[], keep_alive=True, options={"continue_as_new_after_turns": 2},
        session_id=f"replay-chat-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    await handle.send("second")
    await handle.send("third")
    for _ in range(200):
        if (await handle.latest_message()).content == "three":
            break
        await asyncio.sleep(0.05)
    await handle.stop("recorded")
    await handle.result()
    return handle.id


SCENARIOS: dict[str, Callable[[AgentToolsClient, Callable[[list[Any]], str]], Awaitable[str]]] = {
    "session_tools_in_parallel": scenario_tools_in_parallel,
    "session_chat_continue_as_new": scenario_chat_with_continue_as_new,
}


async def record(names: list[str] | None = None) -> None:
    HISTORIES.mkdir(exist_ok=True)
    env = await start_dev_server(ui=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            counter = iter(range(1000))

            def script(items: list[Any]) -> str:
                return write_script(Path(tmp) / f"s{next(counter)}.json", items)

            settings = Settings(
                database_url=f"sqlite+aiosqlite:///{tmp}/store.sqlite", task_queue="record", agents_file=None
            )
            plugin = AgentToolsPlugin(settings, tools=[lookup])
            temporal = await Client.connect(env.client.service_client.config.target_host, plugins=[plugin])
            async with build_worker(temporal, plugin):
                client = AgentToolsClient(temporal, settings)
                for name, scenario in SCENARIOS.items():
                    if names and name not in names:
                        continue
                    wid = await scenario(client, script)
                    # Every run of the chain (continue-as-new) is a history of its own.
                    async for wf in temporal.list_workflows(f"WorkflowId = '{wid}'"):
                        history = await temporal.get_workflow_handle(wid, run_id=wf.run_id).fetch_history()
                        path = HISTORIES / f"{name}.{wf.run_id[:8]}.json"
                        path.write_text(json.dumps(json.loads(history.to_json()), indent=1))
                        print("recorded", path.name)
                await client.close()
    finally:
        await env.shutdown()


if __name__ == "__main__":
    import sys

    asyncio.run(record(sys.argv[1:] or None))
