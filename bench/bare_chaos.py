"""The chaos bench's reference: a bare Temporal agent loop and its worker, importing nothing of ours.

The loop passes the whole message list to every model call (the common design). Its model step sleeps the
step's seconds and asks for one tool call, beating the heartbeat once a second as ours does; its calls get
the same timeouts and retries as the engine's production settings, which the driver passes in
(``BareChaosInput``), and its worker the same sticky timeout, heartbeat throttle and pollers.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import PollerBehaviorAutoscaling, Worker


@dataclass
class CallTimeouts:
    start_to_close: float
    heartbeat: float
    initial_interval: float
    backoff: float
    maximum_interval: float
    maximum_attempts: int


@dataclass
class BareChaosInput:
    prompt: str
    turns: int
    step_seconds: float
    model: CallTimeouts
    tool: CallTimeouts


@dataclass
class ModelInput:
    messages: list[dict[str, Any]]
    turns: int
    step_seconds: float


@dataclass
class ToolInput:
    topic: str


@dataclass
class BareChaosResult:
    messages: list[dict[str, Any]] = field(default_factory=list)


async def _beating_sleep(seconds: float) -> None:
    """Sleeps ``seconds``, heartbeating once a second."""
    end = asyncio.get_running_loop().time() + seconds
    while (left := end - asyncio.get_running_loop().time()) > 0:
        activity.heartbeat()
        await asyncio.sleep(min(1.0, left))


@activity.defn(name="bare_chaos.model")
async def bare_model(inp: ModelInput) -> dict[str, Any]:
    """A scripted model: step i (the number of assistant messages so far) calls the tool until ``turns``."""
    await _beating_sleep(inp.step_seconds)
    step = sum(1 for m in inp.messages if m["role"] == "assistant")
    if step >= inp.turns:
        return {"role": "assistant", "content": "done", "tool_calls": []}
    call = {"id": f"call-{step}", "name": "lookup", "arguments": {"topic": f"t{step}"}}
    return {"role": "assistant", "content": f"step {step}", "tool_calls": [call]}


@activity.defn(name="bare_chaos.lookup")
async def bare_lookup(inp: ToolInput) -> str:
    activity.heartbeat()
    return f"{inp.topic}: " + "lorem ipsum dolor sit amet " * 40


def _options(t: CallTimeouts) -> dict[str, Any]:
    return {
        "start_to_close_timeout": timedelta(seconds=t.start_to_close),
        "heartbeat_timeout": timedelta(seconds=t.heartbeat),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=t.initial_interval),
            backoff_coefficient=t.backoff,
            maximum_interval=timedelta(seconds=t.maximum_interval),
            maximum_attempts=t.maximum_attempts,
        ),
    }


@workflow.defn(name="BareChaosLoop")
class BareChaosLoop:
    @workflow.run
    async def run(self, inp: BareChaosInput) -> BareChaosResult:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You are a capable assistant."},
            {"role": "user", "content": inp.prompt},
        ]
        for _ in range(inp.turns + 1):
            reply = await workflow.execute_activity(
                bare_model, ModelInput(messages, inp.turns, inp.step_seconds), **_options(inp.model)
            )
            messages.append(reply)
            if not reply["tool_calls"]:
                break
            for call in reply["tool_calls"]:
                out = await workflow.execute_activity(
                    bare_lookup, ToolInput(str(call["arguments"]["topic"])), **_options(inp.tool)
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "name": call["name"], "content": out})
        return BareChaosResult(messages)


async def run_worker(address: str, task_queue: str, sticky: float, throttle: float, max_activities: int) -> None:
    client = await Client.connect(address)
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[BareChaosLoop],
        activities=[bare_model, bare_lookup],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky),
        max_heartbeat_throttle_interval=timedelta(seconds=throttle),
        workflow_task_poller_behavior=PollerBehaviorAutoscaling(),
        activity_task_poller_behavior=PollerBehaviorAutoscaling(),
        max_concurrent_activities=max_activities,
        build_id="bare-chaos",
    )
    print("ready", flush=True)
    await worker.run()
