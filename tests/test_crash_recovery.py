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

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script

ROOT = Path(__file__).resolve().parents[1]


def _spawn_worker(env_vars: dict[str, str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, **env_vars}
    return subprocess.Popen([sys.executable, str(ROOT / "worker.py")], env=env, cwd=ROOT)


def _stop_all(workers: list[subprocess.Popen[bytes]]) -> None:
    for proc in workers:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)


async def _worker_env(temporal_env: WorkflowEnvironment, settings: Settings) -> tuple[dict[str, str], AgentToolsClient]:
    """The environment of a worker process (worker.py) for this test's settings, and a client beside it."""
    target = temporal_env.client.service_client.config.target_host
    env_vars = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": target,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_MODEL": settings.model or "",
        "AGENT_TOOLS_AGENTS_FILE": "",
    }
    temporal = await Client.connect(target, data_converter=pydantic_data_converter)
    return env_vars, AgentToolsClient(temporal, settings)


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
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script, *, delay: float, heartbeat_timeout: float
) -> AsyncIterator[MidTurn]:
    """A session on a worker process (worker.py) whose second model call, ``delay`` seconds long, has begun."""
    settings.model = script(
        [
            {"say": "step one", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "in_progress"}]}}]},
            {"say": "step two", "delay_seconds": delay, "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "completed"}]}}]},
            {"say": "finished"},
        ]
    )  # fmt: skip
    env_vars, client = await _worker_env(temporal_env, settings)
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
        _stop_all(workers)
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


async def test_sigkill_mid_turn_second_worker_finishes(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    async with second_model_call_in_flight(temporal_env, settings, script, delay=4, heartbeat_timeout=2) as mid:
        mid.first.send_signal(signal.SIGKILL)
        mid.first.wait(timeout=10)
        mid.spawn_second()
        await _finished_without_duplicates(mid.handle)


async def test_sigterm_lets_the_call_in_flight_finish_then_a_second_worker_goes_on(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script
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


STREAMED = " ".join(f"word{i}" for i in range(60))


async def test_worker_killed_mid_stream_another_finishes_the_step_once(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    """The first worker dies while the model's text streams; the step is retried on a second worker, whose
    attempt tells subscribers to discard the partial text: one final message, and a subscriber that honours
    the discard shows the text once."""
    from agent_tools._activity_io import ProgressEvent
    from agent_tools._live_text import LiveText

    settings.model = script([{"say": STREAMED, "word_seconds": 0.1}])
    env_vars, client = await _worker_env(temporal_env, settings)
    workers = [_spawn_worker(env_vars)]
    try:
        handle = await client.start_session("write", options={"heartbeat_timeout_seconds": 2})
        events: list[ProgressEvent] = []
        first_attempt = ""
        async for event in handle.progress():
            events.append(event)
            if event.kind == "text_delta" and event.data["attempt"] == 1:
                first_attempt += event.data["text"]
            if len(workers) == 1 and "word12" in first_attempt:
                workers[0].send_signal(signal.SIGKILL)  # mid-stream
                workers[0].wait(timeout=10)
                workers.append(_spawn_worker(env_vars))
        result = await asyncio.wait_for(handle.result(), timeout=90)
        entries = await handle.transcript()
    finally:
        _stop_all(workers)
        await client.close()
    assert len(workers) == 2, "the worker was never killed mid-stream"
    assert result.status == SessionStatus.completed and result.final_message == STREAMED
    assert [e.content for e in entries if e.role == "assistant"] == [STREAMED]  # one final message
    deltas = [e for e in events if e.kind == "text_delta"]
    assert {e.data["attempt"] for e in deltas} == {1, 2}
    assert [e.data["attempt"] for e in events if e.kind == "text_discard"] == [2]
    assert [e.kind for e in events].count("assistant_message") == 1
    live = LiveText()
    shown = ""
    for event in events:
        for update in live.feed(event):
            if update.action == "append":
                shown += update.text
            elif update.action == "discard":
                shown = shown[: len(shown) - len(update.text)]
    assert shown == STREAMED  # no duplicate text for a subscriber that honours the discard
    assert "".join(e.data["text"] for e in deltas).count("word1 ") == 2  # ...which the raw deltas do have
