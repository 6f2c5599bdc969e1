"""Messages and answers of megabytes: refused before they reach a workflow task (a worker cannot refuse an
update over Temporal's 2 MB payload limit: the refusal carries the request back, and the task fails), the
refusal never echoes the input, and a valid one sent right after is taken at once."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowUpdateFailedError
from temporalio.common import RawValue

from agent_tools._errors import InvalidInput, SessionError
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import WorkerFor
from tests.support.hostile import task_failures
from tests.support.hostile_cases import ASK
from tests.support.polling import eventually


def _raw(body: Any) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(body).encode()))


async def _timed(call: Any) -> float:
    started = time.monotonic()
    await asyncio.wait_for(call, 60)
    return time.monotonic() - started


@pytest.mark.parametrize("megabytes", [2.2, 3.0])
async def test_an_oversized_answer_is_refused_and_a_valid_one_is_taken_at_once(
    megabytes: float, worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"tool_calls": [ASK]}, {"say": "answered {{last_tool}}"}])
    async with worker_for() as client:
        handle = await client.start_session("ask me")
        await eventually(
            handle.status,
            until=lambda s: s.status == SessionStatus.waiting_for_user,
            timeout=20,
            what="the ask",
        )
        other = "q" * int(megabytes * 1_000_000)
        for by_signal in (False, True):
            with pytest.raises(InvalidInput) as refused:
                await asyncio.wait_for(
                    handle.answer_questions({"Which colour?": {"other": other}}, by_signal=by_signal), 60
                )
            assert "bytes of JSON" in str(refused.value) and "qqqq" not in str(refused.value)
        delay = await _timed(handle.answer_questions({"Which colour?": "Blue"}))
        print(f"a valid answer after a {megabytes} MB one: {delay:.2f} s")
        assert delay < 5
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == SessionStatus.completed and "Blue" in (result.final_message or "")
        assert await task_failures(client.temporal, handle.id) == []


@pytest.mark.parametrize("megabytes", [2.2, 3.0])
async def test_an_oversized_message_is_refused_and_a_valid_one_is_taken_at_once(
    megabytes: float, worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "turn {{last_user}}"}])
    async with worker_for() as client:
        handle = await client.start_session(None, keep_alive=True)
        big = "m" * int(megabytes * 1_000_000)
        with pytest.raises(SessionError) as refused:
            await asyncio.wait_for(handle.send(big), 60)
        assert "bytes of JSON" in str(refused.value) and "mmmm" not in str(refused.value)
        with pytest.raises(SessionError):
            await asyncio.wait_for(handle.send_signal(big), 60)
        delay = await _timed(handle.send("real one"))
        print(f"a valid message after a {megabytes} MB one: {delay:.2f} s")
        assert delay < 5
        await eventually(
            handle.latest_message, until=lambda m: m.content == "turn real one", timeout=20, what="the turn"
        )
        await handle.stop()
        await asyncio.wait_for(handle.result(), 30)
        assert await task_failures(client.temporal, handle.id) == []


async def test_a_raw_update_under_the_payload_limit_is_refused_without_its_input(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    # Under Temporal's limit a raw client's update reaches the validator, which refuses it by its size.
    settings.model = script([{"tool_calls": [ASK]}, {"say": "answered {{last_tool}}"}])
    async with worker_for() as client:
        handle = await client.start_session("ask me")
        await eventually(
            handle.status, until=lambda s: s.status == SessionStatus.waiting_for_user, timeout=20, what="the ask"
        )
        big = {"answers": [{"question": "Which colour?", "other": "q" * 1_500_000}]}
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await asyncio.wait_for(handle.workflow.execute_update("answer_questions", _raw(big), result_type=dict), 60)
        assert "qqqq" not in str(refused.value.cause)
        message = {"content": "m" * 1_500_000}
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await asyncio.wait_for(handle.workflow.execute_update("send_message", _raw(message), result_type=dict), 60)
        assert "mmmm" not in str(refused.value.cause)
        assert await _timed(handle.answer_questions({"Which colour?": "Blue"})) < 5
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == SessionStatus.completed
        assert await task_failures(client.temporal, handle.id) == []
