"""Structured results with hostile input: schemas that are no JSON Schema, huge or deeply nested ones,
retries out of range, from our client and from a raw Temporal client; final answers that are not JSON,
nested past every limit or huge. Each is refused once with the reason or becomes feedback for the model;
no workflow task fails."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowFailureError
from temporalio.common import RawValue

from agent_tools._errors import SessionError
from agent_tools._session import WORKFLOW_NAME, SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import WorkerFor
from tests.support.hostile import task_failures

BAD_SCHEMAS: dict[str, Any] = {
    "not a JSON Schema": {"type": "banana"},
    "a string": "type: object",
    "a bad pattern": {"type": "string", "pattern": "(unclosed"},
    "a remote reference": {"$ref": "http://169.254.169.254/latest/meta-data"},
    "huge": {"enum": ["x" * 1000] * 100},
    "nested 60 levels": json.loads('{"items":' * 60 + "{}" + "}" * 60),
    "an unknown draft": {"$schema": "https://example.com/draft-99", "type": "object"},
    "a NaN bound": {"type": "object", "properties": {"n": {"type": "number", "maximum": float("nan")}}},
    "an infinite bound": {"type": "number", "minimum": float("-inf")},
}


def _raw(body: dict[str, Any]) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(body).encode()))


@pytest.mark.parametrize("label", list(BAD_SCHEMAS))
async def test_a_schema_that_cannot_be_one_is_refused_by_the_client_and_by_the_session(
    label: str, worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    schema = BAD_SCHEMAS[label]
    settings.model = script([{"say": "{}"}])
    async with worker_for() as client:
        if isinstance(schema, dict):
            with pytest.raises(
                SessionError, match=r"refused to start the session: (output_schema|the value is nested deeper)"
            ):
                await client.start_session("hi", output_schema=schema)
        # A raw client skips our checks: the session refuses once, with the reason, and fails.
        wid = f"raw-schema-{label.replace(' ', '-')}"
        handle = await client.temporal.start_workflow(
            WORKFLOW_NAME, _raw({"request": {"prompt": "hi", "output_schema": schema}}), id=wid,
            task_queue=settings.task_queue,
        )  # fmt: skip
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        text = str(failed.value.cause) + str(getattr(failed.value.cause, "cause", ""))
        assert "refused to start" in text or "cannot be read" in text, text
        assert await task_failures(client.temporal, wid) == []


async def test_retries_out_of_range_are_refused(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "1"}])
    async with worker_for() as client:
        with pytest.raises(Exception, match="output_retries"):
            await client.start_session("hi", output_schema={"type": "integer"}, output_retries=1000)
        handle = await client.temporal.start_workflow(
            WORKFLOW_NAME,
            _raw({"request": {"prompt": "hi", "output_schema": {"type": "integer"}, "output_retries": 10**9}}),
            id="raw-retries-huge", task_queue=settings.task_queue,
        )  # fmt: skip
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        assert "output_retries" in str(failed.value.cause)
        assert await task_failures(client.temporal, handle.id) == []


HOSTILE_ANSWERS = {
    "prose": "Sure! Here is your answer.",
    "nested 5000 levels": "[" * 5000 + "]" * 5000,
    "unclosed 100000": "{" * 100_000,
    "huge JSON": json.dumps({"name": "x" * 150_000}),
    "lone surrogates, too long once cleaned": '{"name": "' + "\\ud800" * 11 + '"}',
}
# Escapes that decode to what no payload can carry or no store takes: cleaned, then checked.
CLEANED = {'{"name": "\\ud800"}': {"name": "\ufffd"}, '{"name": "a\\u0000b"}': {"name": "a\ufffdb"}}


async def test_hostile_final_answers_become_feedback_and_then_a_clear_failure(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}, "required": ["name"]}
    async with worker_for() as client:
        for label, answer in HOSTILE_ANSWERS.items():
            model = script([{"say": answer}, {"say": '{"name": "ok"}'}])
            handle = await client.start_session("hi", model=model, output_schema=schema, output_retries=1)
            result = await asyncio.wait_for(handle.result(), 60)
            # Every hostile answer is refused with a reason the model can act on; the retry is the result.
            assert result.status == SessionStatus.completed and result.output == {"name": "ok"}, (label, result)
            feedback = [e.content for e in await handle.transcript() if e.role == "user"][1]
            assert feedback.startswith("Your final answer does not match the required JSON Schema: "), label
            assert len(feedback) < 1500, label
            assert await task_failures(client.temporal, handle.id) == [], label
        for answer, cleaned in CLEANED.items():
            model = script([{"say": answer}])
            result = await client.run("hi", model=model, output_schema=schema)
            assert result.status == SessionStatus.completed and result.output == cleaned, answer
        # Hostile to the end: the retries run out and the session fails once, with the reason.
        model = script([{"say": "[" * 5000}, {"say": "nope"}])
        handle = await client.start_session("hi", model=model, output_schema=schema, output_retries=1)
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == SessionStatus.failed and "after 2 attempts: the answer is not JSON" in (
            result.error or ""
        )
        assert await task_failures(client.temporal, handle.id) == []
