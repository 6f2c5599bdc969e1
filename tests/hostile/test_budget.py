"""Budgets with hostile input: ceilings out of range at the start (our client and a raw one), and the
``budget_reached`` signal with payloads no parent would send. A start is refused once with the reason; a
signal is taken (capped) or dropped; no workflow task fails."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowFailureError
from temporalio.common import RawValue

from agent_tools._boundaries import NOTE_CHARS
from agent_tools._errors import SessionError
from agent_tools._session import WORKFLOW_NAME, SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import WorkerFor
from tests.support.hostile import task_failures
from tests.support.sessions import current_details


def _raw(data: bytes) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


@pytest.mark.parametrize(
    "options",
    [
        {"budget_tokens": -1},
        {"budget_cost_usd": 1e40},
        {"budget_tokens": 10**40},
        {"budget_cost_usd": "lots"},
        {"budget_cost_usd": float("nan")},
        {"budget_cost_usd": float("inf")},
        {"budget_cost_usd": float("-inf")},
        {"budget_tokens": float("nan")},
        {"budget_tokens": float("inf")},
    ],
    ids=[
        "negative tokens",
        "absurd cost",
        "absurd tokens",
        "not a number",
        "NaN cost",
        "Infinity cost",
        "-Infinity cost",
        "NaN tokens",
        "Infinity tokens",
    ],
)
async def test_ceilings_out_of_range_are_refused_at_the_start(
    options: dict[str, Any], worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "hi"}])
    async with worker_for() as client:
        with pytest.raises((SessionError, ValueError)) as refused:
            await client.start_session("hi", options=options)
        number = next(iter(options.values()))
        # (An integer field refuses NaN while the options are built: pydantic's ValidationError, as documented.)
        if isinstance(number, float) and not math.isfinite(number) and "budget_cost_usd" in options:
            assert isinstance(refused.value, SessionError) and "must be a finite number from 0 to" in str(refused.value)
        wid = f"raw-budget-{next(iter(options))}-{uuid.uuid4().hex[:8]}"
        handle = await client.temporal.start_workflow(
            WORKFLOW_NAME, _raw(json.dumps({"request": {"prompt": "hi", "options": options}}).encode()), id=wid,
            task_queue=settings.task_queue,
        )  # fmt: skip
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        assert "refused to start" in str(failed.value.cause)
        assert await task_failures(client.temporal, wid) == []


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "1e308"])
@pytest.mark.parametrize("field", ["budget_cost_usd", "budget_tokens"])
async def test_a_raw_start_with_a_number_json_cannot_hold_is_refused(
    field: str, number: str, worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "hi"}])
    async with worker_for() as client:
        body = json.dumps({"request": {"prompt": "hi", "options": {field: "NUMBER"}}}).replace('"NUMBER"', number)
        wid = f"raw-budget-number-{uuid.uuid4().hex[:8]}"
        handle = await client.temporal.start_workflow(
            WORKFLOW_NAME, _raw(body.encode()), id=wid, task_queue=settings.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        assert "refused to start" in str(failed.value.cause)
        assert await task_failures(client.temporal, wid) == []


async def test_budget_signals_no_parent_would_send_are_dropped_or_capped(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    sub = {"name": "subAgent", "arguments": {"title": "Helper", "instruction": "help", "mode": "sync"}}
    settings.model = script([{"say": "first"}, {"say": "", "tool_calls": [sub]}, {"say": "after: {{last_tool}}"}])
    async with worker_for() as client:
        handle = await client.start_session("hi", keep_alive=True, tools=["subAgent"])
        for _ in range(200):
            if (await handle.status()).status == SessionStatus.idle:
                break
            await asyncio.sleep(0.05)
        for payload in (b'"garbage"', b"[1, 2]", b'{"x":' * 300 + b"1" + b"}" * 300, b"not json", b'{"reason": 5}'):
            await handle.workflow.signal("budget_reached", _raw(payload))
        # A lone surrogate (as a JSON escape: no client could encode it otherwise): the decoder drops it too.
        await handle.workflow.signal("budget_reached", _raw(json.dumps({"reason": "\ud800 spent"}).encode()))
        # A megabyte of reason with a NUL: taken, cleaned and capped.
        await handle.workflow.signal("budget_reached", {"reason": "\x00 spent " + "x" * 1_000_000})
        # The session goes on: a message is taken, and the told session refuses to start a sub-agent.
        await handle.send("delegate")
        for _ in range(200):
            if (await handle.latest_message()).content.startswith("after:"):
                break
            await asyncio.sleep(0.05)
        answer = (await handle.latest_message()).content
        assert answer.startswith("after: subAgent refused: told by the parent \ufffd spent xxx"), answer[:200]
        assert len(answer) < NOTE_CHARS + 300
        assert len(await current_details(handle)) < 3 * NOTE_CHARS
        await handle.stop("done")
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == SessionStatus.stopped
        assert await task_failures(client.temporal, handle.id) == []
