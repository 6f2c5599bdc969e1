"""Every client entry (start, send by update and signal, answer by update and signal, stop) with hostile
input, through the raw Temporal client as well as ours: a client gets a clear refusal, and nothing it sends
makes a workflow task fail or a session hang."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import RawValue

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._errors import SessionError
from agent_tools._session import WORKFLOW_NAME, SessionStatus
from agent_tools._settings import Settings
from agent_tools.contracts._human import MAX_OTHER_CHARS, MAX_REJECTED_KEPT, HumanState
from tests.support.fixture_types import WorkerFor
from tests.support.hostile import signal_settled, task_failures
from tests.support.hostile_cases import ASK
from tests.support.polling import eventually


def _raw(data: bytes) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


def _deep(levels: int) -> str:
    return '{"x":' * levels + "1" + "}" * levels


async def _no_task_failures(client: AgentToolsClient, workflow_id: str) -> None:
    assert await task_failures(client.temporal, workflow_id) == []


async def _pending(handle: SessionHandle) -> None:
    await eventually(
        handle.status,
        until=lambda s: s.status == SessionStatus.waiting_for_user,
        timeout=20,
        interval=0.05,
        what="the session asking",
    )


@pytest.mark.parametrize(
    ("label", "payload"),
    [
        ("not an object", b'"garbage"'),
        ("a list", b"[1, 2]"),
        ("wrong types", b'{"request": {"max_steps": "lots"}}'),
        ("nested 300 levels", _deep(300).encode()),
        ("a megabyte of prompt", json.dumps({"request": {"prompt": "x" * 1_000_000}}).encode()),
        ("an absurd depth", b'{"request": {"depth": 100000000000000000000000000000000000000}}'),
        # A budget below a new run's own start would continue-as-new for ever.
        ("a tiny history budget", b'{"request": {"options": {"continue_as_new_after_events": 1}}}'),
        ("a negative history budget", b'{"request": {"options": {"continue_as_new_after_events": -5}}}'),
    ],
)
async def test_a_raw_start_that_cannot_be_taken_fails_the_session_once_with_the_reason(
    label: str, payload: bytes, worker_for: WorkerFor, settings: Settings
) -> None:
    async with worker_for() as client:
        handle = await client.temporal.start_workflow(
            WORKFLOW_NAME, _raw(payload), id=f"raw-start-{label.replace(' ', '-')}", task_queue=settings.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        assert "refused to start" in str(failed.value.cause)
        await _no_task_failures(client, handle.id)


async def test_our_client_refuses_a_bad_start_and_a_reused_id(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "hi"}])
    async with worker_for() as client:
        with pytest.raises(SessionError, match="prompt: must be at most 100,000 characters"):
            await client.start_session("x" * 200_000)
        with pytest.raises(SessionError, match="session ids are at most 200"):
            await client.start_session("hi", session_id="s" * 500)
        first = await client.start_session("hi", session_id="reused-id")
        assert (await first.result()).final_message == "hi"
        # The id of a finished session: a second run would mix both runs' transcripts and memories.
        with pytest.raises(SessionError, match="exists already"):
            await client.start_session("again", session_id="reused-id")


async def test_a_nul_byte_in_the_prompt_reaches_the_store_cleaned(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings, store_url: str
) -> None:
    settings.database_url = store_url
    settings.model = script([{"say": "got {{last_user}}"}])
    async with worker_for(settings=settings) as client:
        handle = await client.start_session("a\x00b\ud800c")
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.final_message == "got a\ufffdb\ufffdc"
        assert [e.content for e in await handle.transcript()][1] == "a\ufffdb\ufffdc"


async def test_messages_a_client_may_not_send_are_refused_or_dropped(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "turn {{last_user}}"}])
    async with worker_for() as client:
        handle = await client.start_session(None, keep_alive=True)
        refusals = {
            "a sub-agent notification": {"content": "child done", "kind": "subagent"},
            "a megabyte": {"content": "x" * 1_000_000},
            "deep meta": {"content": "hi", "meta": json.loads(_deep(20))},
            "an empty message": {"content": ""},
        }
        for label, body in refusals.items():
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.workflow.execute_update("send_message", body, result_type=dict)
            # The signal twin cannot be refused: it is dropped and said on the progress stream.
            await handle.workflow.signal("send_message", body)
            assert label
        await handle.workflow.signal("send_message", _raw(b'"not an object"'))
        await handle.workflow.signal("send_message", _raw(_deep(300).encode()))
        accepted = await handle.send("real one")
        assert accepted.position >= 0
        for _ in range(100):
            if (await handle.latest_message()).content == "turn real one":
                break
            await asyncio.sleep(0.05)
        assert (await handle.latest_message()).content == "turn real one"
        kinds = [e.kind async for e in _progress_until(handle, "assistant_message")]
        assert kinds.count("input_rejected") == 3  # the three decodable signals (the SDK drops the other two)
        await handle.stop("x" * 1_000_000)  # a stop is never refused; its reason is cut
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == SessionStatus.stopped
        await _no_task_failures(client, handle.id)


async def _progress_until(handle: SessionHandle, kind: str) -> Any:
    async for event in handle.progress():
        yield event
        if event.kind == kind:
            return


async def test_answers_that_do_not_fit_are_recorded_small_and_the_session_goes_on(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"tool_calls": [ASK]}, {"say": "answered {{last_tool}}"}])
    async with worker_for() as client:
        handle = await client.start_session("ask me")
        await _pending(handle)
        # By update: refused with a reason, nothing recorded.
        bad: dict[str, Any]
        for bad in (
            {"answers": []},
            {"answers": [{"question": "Which colour?", "other": "x" * (MAX_OTHER_CHARS + 1)}]},
        ):
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.workflow.execute_update("answer_questions", bad, result_type=dict)
        # By signal: recorded as rejected, small and bounded, whatever the payload.
        for payload in (b'"garbage"', b"[1, 2]", _deep(300).encode(), b"not json at all"):
            await handle.workflow.signal("answer_questions_signal", _raw(payload))
        for _ in range(100):
            state = await handle.query("human_state", HumanState)
            if len(state.rejected) == 4:
                break
            await asyncio.sleep(0.05)
        assert [r.reason.split(":")[0] for r in state.rejected] == [
            "answers must be a JSON object, got str",
            "answers must be a JSON object, got list",
            "answers are not JSON the session can read (malformed, or nested too deeply)",
            "answers are not JSON the session can read (malformed, or nested too deeply)",
        ]
        big = json.dumps({"answers": [{"question": "Which colour?", "other": "y" * 400_000}]}).encode()
        for _ in range(MAX_REJECTED_KEPT + 4):  # (9.6 MB: one at a time, see signal_settled)
            await signal_settled(handle, "answer_questions_signal", _raw(big), ("answer_questions", {"answers": []}))
        for _ in range(100):
            state = await handle.query("human_state", HumanState)
            if state.rejected[-1].size == len(big) and state.rejected[0].size == len(big):
                break
            await asyncio.sleep(0.05)
        # Kept small and bounded: the last 20, each a reason, 200 bytes of the payload and its size.
        assert len(state.rejected) == MAX_REJECTED_KEPT
        assert all(r.payload == {} and len(r.preview or "") <= 200 and r.size == len(big) for r in state.rejected)
        assert all(r.reason.startswith("answers out of bounds: answers.0.other") for r in state.rejected)
        # The pending question is still there, and a valid answer completes the turn.
        assert [q.question for q in await handle.pending_questions()] == ["Which colour?"]
        await handle.answer_questions({"Which colour?": "Blue"})
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == SessionStatus.completed and "Blue" in (result.final_message or "")
        await _no_task_failures(client, handle.id)
