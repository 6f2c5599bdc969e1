"""Activities heartbeat often enough for their heartbeat timeout: a dead worker's call is retried within
seconds (bench/chaos.py measures the recovery), and a live one is never taken for dead; the other recovery
timeouts (sticky queue, workflow task) and their settings."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from datetime import timedelta

import pytest
from pydantic import ValidationError
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum

from agent_tools._plugin import AgentToolsPlugin
from agent_tools._policy import (
    HEARTBEAT_SECONDS,
    RETRY_INITIAL_SECONDS,
    WORKFLOW_TASK_TIMEOUT_SECONDS,
    CallPolicy,
    ExecutionPolicy,
)
from agent_tools._settings import Settings
from agent_tools._worker import HEARTBEAT_THROTTLE_SECONDS, STICKY_TIMEOUT_SECONDS, build_worker
from agent_tools.activities._heartbeat import with_heartbeat
from tests.support.fixture_types import Script, WorkerFor


async def _beats_during(seconds: float, timeout: timedelta | None) -> list[float]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timeout)
    loop = asyncio.get_running_loop()
    started = loop.time()
    beats: list[float] = []
    env.on_heartbeat = lambda *_: beats.append(loop.time() - started)

    async def call() -> str:
        return await with_heartbeat(asyncio.sleep(seconds, result="done"))

    assert await env.run(call) == "done"
    return beats


async def test_five_beats_per_heartbeat_timeout() -> None:
    beats = await _beats_during(1.1, timedelta(seconds=1))
    # One beat per fifth of the timeout: the SDK forwards one per 0.8 of it, so every window has one.
    assert len(beats) >= 4, beats
    assert beats[0] >= 0.15, beats  # the first beat waits one interval: a short call costs no heartbeat
    assert all(b - a < 0.5 for a, b in itertools.pairwise(beats)), beats


async def test_no_beats_without_a_heartbeat_timeout() -> None:
    assert await _beats_during(0.3, None) == []


def test_model_steps_and_tools_are_noticed_dead_within_seconds() -> None:
    policy = ExecutionPolicy()
    for call in (policy.model_step, policy.tool_call):
        assert call.heartbeat_seconds == HEARTBEAT_SECONDS
        # Far below start-to-close (the only other bound on a dead worker's call) and above one beat.
        assert call.heartbeat_seconds is not None and call.heartbeat_seconds * 20 <= call.start_to_close_seconds
        assert call.initial_interval_seconds == RETRY_INITIAL_SECONDS
    assert HEARTBEAT_SECONDS <= 10
    # A loaded worker keeps 3 s of slack between the beats it forwards and the timeout: with 1 s and 2 s,
    # live calls were taken for dead in the chaos bench's fault-free runs.
    assert HEARTBEAT_SECONDS - HEARTBEAT_THROTTLE_SECONDS >= 3


def _backoff(call: CallPolicy) -> list[float]:
    delays, delay = [], call.initial_interval_seconds
    for _ in range(call.maximum_attempts - 1):
        delays.append(min(delay, call.maximum_interval_seconds))
        delay *= call.backoff_coefficient
    return delays


def test_a_failing_provider_is_still_ridden_out_for_minutes() -> None:
    # The quick first retry is for a dead worker's call; a provider that keeps failing (without a
    # Retry-After) still gets its eight attempts over more than the two minutes it had with 1 s doubling.
    step = ExecutionPolicy().model_step
    assert step.maximum_attempts == 8
    assert _backoff(step)[0] == RETRY_INITIAL_SECONDS
    assert sum(_backoff(step)) >= 120


async def test_build_worker_sets_the_recovery_timeouts(temporal_env: WorkflowEnvironment, settings: Settings) -> None:
    plugin = AgentToolsPlugin(settings)
    client = await Client.connect(temporal_env.client.service_client.config.target_host, plugins=[plugin])
    config = build_worker(client, plugin).config(active_config=True)
    assert config["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=STICKY_TIMEOUT_SECONDS)
    assert config["max_heartbeat_throttle_interval"] == timedelta(seconds=HEARTBEAT_THROTTLE_SECONDS)
    assert 1 <= STICKY_TIMEOUT_SECONDS <= 5
    # The pollers scale with the server's feedback (Temporal's recommended setting), not the SDK's fixed five.
    assert isinstance(config["workflow_task_poller_behavior"], PollerBehaviorAutoscaling)
    assert isinstance(config["activity_task_poller_behavior"], PollerBehaviorAutoscaling)
    # The host may choose its own.
    other = AgentToolsPlugin(settings.model_copy(update={"task_queue": f"{settings.task_queue}-2"}))
    client2 = await Client.connect(temporal_env.client.service_client.config.target_host, plugins=[other])
    mine = build_worker(
        client2,
        other,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=7),
        workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(3),
    )
    chosen = mine.config(active_config=True)
    assert chosen["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=7)
    assert chosen["workflow_task_poller_behavior"] == PollerBehaviorSimpleMaximum(3)
    assert isinstance(chosen["activity_task_poller_behavior"], PollerBehaviorAutoscaling)


@pytest.mark.parametrize(
    "value",
    ["0", "0.5", "-3", "121", "1e308", "nan", "inf", "-inf", "ten", "", "[5]", "9" * 5000],
)
def test_a_workflow_task_timeout_that_does_not_fit_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # Temporal takes 1-120 s (it silently caps a longer one); below a second a task could never replay.
    monkeypatch.setenv("AGENT_TOOLS_POLICY__WORKFLOW_TASK_TIMEOUT_SECONDS", value)
    with pytest.raises(ValidationError, match="workflow_task_timeout_seconds"):
        Settings(agents_file=None)


@pytest.mark.parametrize(
    "value", [None, True, False, {"seconds": 5}, [5], 10**40, float("nan"), "5 s", "5\x00", "\ud800", b"\x00"]
)
def test_a_workflow_task_timeout_of_the_wrong_kind_is_refused(value: object) -> None:
    with pytest.raises(ValidationError, match="workflow_task_timeout_seconds"):
        ExecutionPolicy.model_validate({"workflow_task_timeout_seconds": value})


def test_the_workflow_task_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ExecutionPolicy().workflow_task_timeout_seconds == WORKFLOW_TASK_TIMEOUT_SECONDS
    monkeypatch.setenv("AGENT_TOOLS_POLICY__WORKFLOW_TASK_TIMEOUT_SECONDS", "30")
    policy = Settings(agents_file=None).policy
    assert policy.workflow_task_timeout_seconds == 30
    assert policy.model_step == ExecutionPolicy().model_step  # the other sections keep their defaults


async def test_sessions_and_their_continued_runs_carry_the_workflow_task_timeout(
    worker_for: WorkerFor, script: Script, settings: Settings
) -> None:
    settings.model = script([{"say": "one"}, {"say": "two"}])
    settings.policy = settings.policy.merged({"workflow_task_timeout_seconds": 7})
    async with worker_for(settings=settings) as client:
        handle = await client.start_session("first", keep_alive=True, options={"continue_as_new_after_turns": 1})
        for _ in range(400):
            if (await handle.latest_message()).content == "one":
                break
            await asyncio.sleep(0.05)
        await handle.send("second")
        for _ in range(400):
            if (await handle.latest_message()).content == "two":
                break
            await asyncio.sleep(0.05)
        runs = [wf.run_id async for wf in client.temporal.list_workflows(f"WorkflowId = '{handle.id}'")]
        assert len(runs) >= 2  # it continued as new
        for run_id in runs:
            history = await client.temporal.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
            started = history.events[0].workflow_execution_started_event_attributes
            assert started.workflow_task_timeout.ToTimedelta() == timedelta(seconds=7), run_id
        await handle.stop()


async def test_sub_agents_get_their_parents_workflow_task_timeout(
    worker_for: WorkerFor, script: Script, settings: Settings
) -> None:
    """The client starts a root with the policy's timeout; its sub-agents are started by the workflow, which
    passes on its own (they had Temporal's default whatever the setting)."""
    settings.model = script(
        [
            {"match": {"title": "Child"}, "turns": [{"say": "child done"}]},
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "subAgent", "arguments": {"title": "Child", "instruction": "x", "mode": "sync"}}
                        ]
                    },
                    {"say": "parent done"},
                ]
            },
        ]
    )
    settings.policy = settings.policy.merged({"workflow_task_timeout_seconds": 7})
    async with worker_for(settings=settings) as client:
        handle = await client.start_session("go", tools=["subAgent"])
        assert (await handle.result()).final_message == "parent done"
        for workflow_id in (handle.id, f"{handle.id}/sub-1"):
            history = await client.temporal.get_workflow_handle(workflow_id).fetch_history()
            started = history.events[0].workflow_execution_started_event_attributes
            assert started.workflow_task_timeout.ToTimedelta() == timedelta(seconds=7), workflow_id
