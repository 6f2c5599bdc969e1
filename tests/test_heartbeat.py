"""Activities heartbeat often enough for their heartbeat timeout: a dead worker's call is retried within
seconds (bench/chaos.py measures the recovery), and a live one is never taken for dead."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from datetime import timedelta

from temporalio.testing import ActivityEnvironment

from agent_tools.activities.heartbeat import with_heartbeat
from agent_tools.policy import HEARTBEAT_SECONDS, ExecutionPolicy


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
    assert HEARTBEAT_SECONDS <= 10
