"""A worker process killed with SIGKILL mid-turn, or stopped with SIGTERM mid-turn; a second worker process
finishes the session."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_tools.client import AgentToolsClient, SessionHandle
from agent_tools.session import SessionStatus

ROOT = Path(__file__).resolve().parents[1]


def _spawn_worker(env_vars: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, **env_vars}
    return subprocess.Popen([sys.executable, str(ROOT / "worker.py")], env=env, cwd=ROOT)


@dataclass
class MidTurn:
    handle: SessionHandle
    first: subprocess.Popen[bytes]
    env_vars: dict[str, str]
    # Every worker process of the test (the fixture stops whichever still run).
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def spawn_second(self) -> None:
        self.workers.append(_spawn_worker(self.env_vars))


@asynccontextmanager
async def second_model_call_in_flight(
    temporal_env: Any, settings: Any, script: Any, *, delay: float, heartbeat_timeout: float
) -> AsyncIterator[MidTurn]:
    """A session on a worker process (worker.py) whose second model call, ``delay`` seconds long, has begun."""
    settings.model = script(
        [
            {"say": "step one", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "in_progress"}]}}]},
            {"say": "step two", "delay_seconds": delay, "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "completed"}]}}]},
            {"say": "finished"},
        ]
    )  # fmt: skip
    target = temporal_env.client.service_client.config.target_host
    env_vars = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": target,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_MODEL": settings.model,
        "AGENT_TOOLS_AGENTS_FILE": "",
    }
    temporal = await Client.connect(target, data_converter=pydantic_data_converter)
    client = AgentToolsClient(temporal, settings)
    workers = [_spawn_worker(env_vars)]
    try:
        handle = await client.start_session("do it", options={"heartbeat_timeout_seconds": heartbeat_timeout})
        for _ in range(300):
            status = await handle.status()
            if status.steps >= 2:
                break
            await asyncio.sleep(0.1)
        assert status.steps == 2, status
        await asyncio.sleep(0.5)  # the second model call is now in flight on the first worker
        yield MidTurn(handle=handle, first=workers[0], env_vars=env_vars, workers=workers)
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        await client.close()


async def _finished_without_duplicates(handle: SessionHandle) -> None:
    result = await asyncio.wait_for(handle.result(), timeout=90)
    assert result.status == SessionStatus.completed
    assert result.final_message == "finished"
    entries = await handle.transcript()
    assert [e.seq for e in entries] == list(range(len(entries)))
    assert [e.role for e in entries] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [e.content for e in entries if e.role == "assistant"] == ["step one", "step two", "finished"]
    assert result.usage.calls == 3


async def test_sigkill_mid_turn_second_worker_finishes(temporal_env: Any, settings: Any, script: Any) -> None:
    async with second_model_call_in_flight(temporal_env, settings, script, delay=4, heartbeat_timeout=2) as mid:
        mid.first.send_signal(signal.SIGKILL)
        mid.first.wait(timeout=10)
        mid.spawn_second()
        await _finished_without_duplicates(mid.handle)


async def test_sigterm_lets_the_call_in_flight_finish_then_a_second_worker_goes_on(
    temporal_env: Any, settings: Any, script: Any
) -> None:
    # A long heartbeat timeout: only a graceful stop can finish the call without a retry in this test.
    async with second_model_call_in_flight(temporal_env, settings, script, delay=3, heartbeat_timeout=60) as mid:
        mid.first.send_signal(signal.SIGTERM)
        stopped_at = asyncio.get_running_loop().time()
        code = await asyncio.to_thread(mid.first.wait, 30)
        waited = asyncio.get_running_loop().time() - stopped_at
        assert code == 0
        assert waited >= 1.5, waited  # it waited for the model call (3 s, 0.5 s of it gone) instead of dying
        mid.spawn_second()
        await _finished_without_duplicates(mid.handle)
        history = await mid.handle.workflow.fetch_history()
        attempts = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        ]
        assert attempts and set(attempts) == {1}, attempts  # no call ran twice
