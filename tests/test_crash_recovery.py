"""A worker process killed with SIGKILL mid-turn; a second worker process finishes the session."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from agent_tools.client import AgentToolsClient
from agent_tools.session import SessionStatus

ROOT = Path(__file__).resolve().parents[1]


def _spawn_worker(env_vars: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, **env_vars}
    return subprocess.Popen([sys.executable, str(ROOT / "worker.py")], env=env, cwd=ROOT)


async def test_sigkill_mid_turn_second_worker_finishes(temporal_env: Any, settings: Any, script: Any) -> None:
    settings.model = script(
        [
            {"say": "step one", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "in_progress"}]}}]},
            # The worker is killed while this model call is in flight.
            {"say": "step two", "delay_seconds": 4, "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "completed"}]}}]},
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
    first = _spawn_worker(env_vars)
    second: subprocess.Popen[bytes] | None = None
    try:
        handle = await client.start_session("do it", options={"heartbeat_timeout_seconds": 2})
        for _ in range(300):
            status = await handle.status()
            if status.steps >= 2:
                break
            await asyncio.sleep(0.1)
        assert status.steps == 2, status
        await asyncio.sleep(0.5)  # the second model call is now in flight on the first worker
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
        second = _spawn_worker(env_vars)
        result = await asyncio.wait_for(handle.result(), timeout=90)
        assert result.status == SessionStatus.completed
        assert result.final_message == "finished"
        entries = await handle.transcript()
        assert [e.seq for e in entries] == list(range(len(entries)))
        assert [e.role for e in entries] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
        assert [e.content for e in entries if e.role == "assistant"] == ["step one", "step two", "finished"]
        assert result.usage.calls == 3
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        await client.close()


async def test_sigterm_lets_the_call_in_flight_finish_then_a_second_worker_goes_on(
    temporal_env: Any, settings: Any, script: Any
) -> None:
    settings.model = script(
        [
            {"say": "step one", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "in_progress"}]}}]},
            # SIGTERM arrives while this model call is in flight: the worker lets it finish before it exits.
            {"say": "step two", "delay_seconds": 3, "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "completed"}]}}]},
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
    first = _spawn_worker(env_vars)
    second: subprocess.Popen[bytes] | None = None
    try:
        # A long heartbeat timeout: only a graceful stop can finish the call without a retry in this test.
        handle = await client.start_session("do it", options={"heartbeat_timeout_seconds": 60})
        for _ in range(300):
            status = await handle.status()
            if status.steps >= 2:
                break
            await asyncio.sleep(0.1)
        assert status.steps == 2, status
        await asyncio.sleep(0.5)
        first.send_signal(signal.SIGTERM)
        stopped_at = asyncio.get_running_loop().time()
        code = await asyncio.to_thread(first.wait, 30)
        waited = asyncio.get_running_loop().time() - stopped_at
        assert code == 0
        assert waited >= 1.5, waited  # it waited for the model call (3 s, 0.5 s of it gone) instead of dying
        second = _spawn_worker(env_vars)
        result = await asyncio.wait_for(handle.result(), timeout=60)
        assert result.status == SessionStatus.completed and result.final_message == "finished"
        history = await handle.workflow.fetch_history()
        attempts = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
        ]
        assert attempts and set(attempts) == {1}, attempts  # no call ran twice
        assert [e.content for e in await handle.transcript() if e.role == "assistant"] == [
            "step one",
            "step two",
            "finished",
        ]
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        await client.close()
