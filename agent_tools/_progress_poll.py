"""Following a session's progress stream by query, so that watching a session writes nothing to its history.

The SDK's ``WorkflowStreamClient.subscribe`` long-polls with an update: every poll is two history events
and a workflow task, and in a watched session those polls were most of the history and of the Temporal UI's
timeline (a wait for a person showed as a poll bar). The stream answers the same poll as a query, which
the server does not record. A query is a task on the worker, though (a replay, for a session it does not
cache), so the worker is asked only when the run's history has grown since the last answer: a new item
comes only from a workflow task, which adds events. While nothing happens the poller asks the server for
the run's length (``describe``, no worker involved), less and less often (``interval`` up to
``idle_interval``), and the worker not at all.

What holds: every item is yielded once and in order (offsets come from the workflow's stream, carried over
continue-as-new); the iterator ends after the session's run closed and its last items were read; a session
that does not exist raises NOT_FOUND's ``RPCError`` for the caller to name.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle, WorkflowQueryFailedError
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.converter import PayloadConverter
from temporalio.service import RPCError, RPCStatusCode

__all__ = ["POLL_QUERY", "follow_with_offsets"]

T = TypeVar("T")

POLL_QUERY = "__temporal_workflow_stream_poll"

# A run in one of these states writes no more items.
_CLOSED = frozenset(
    {
        WorkflowExecutionStatus.COMPLETED,
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)


def decode_item(data: str) -> Payload:
    """A stream item's payload from its wire form (base64 of the serialized ``Payload``)."""
    payload = Payload()
    payload.ParseFromString(base64.b64decode(data))
    return payload


async def follow_with_offsets(
    temporal: Client,
    workflow_id: str,
    topic: str,
    from_offset: int,
    result_type: type[T],
    *,
    interval: float = 0.1,
    idle_interval: float = 1.0,
) -> AsyncIterator[tuple[int, T]]:
    """Items of ``topic`` from ``from_offset`` on, each with its offset in the workflow's stream, until the
    workflow's latest run has closed: following again from an item's offset plus one yields exactly the
    items after it."""
    handle: WorkflowHandle[object, object] = temporal.get_workflow_handle(workflow_id)
    converter = temporal.data_converter.payload_converter
    offset, wait = from_offset, interval
    answered_at: tuple[str | None, int] | None = None  # (run, history length) of the last answer
    while True:
        description = await handle.describe()
        seen = (description.run_id, description.history_length)
        if description.status in _CLOSED:
            # What the run wrote last, and the end.
            async for pair in _drain(handle, topic, offset, result_type, converter):
                yield pair
            return
        result = None if seen == answered_at else await _poll(handle, topic, offset)
        if result is not None:
            answered_at = seen
            for item in result.items:
                yield item.offset, converter.from_payload(decode_item(item.data), result_type)
            offset = result.next_offset
            if result.more_ready:
                answered_at = None
                continue
            if result.items:
                wait = interval
                await asyncio.sleep(wait)
                continue
        wait = min(idle_interval, wait * 1.5)
        await asyncio.sleep(wait)


async def _poll(handle: WorkflowHandle[object, object], topic: str, offset: int) -> PollResult | None:
    """One poll; None while the workflow cannot answer (its first task has not run, no worker for now)."""
    try:
        result: PollResult = await handle.query(
            POLL_QUERY, PollInput(topics=[topic], from_offset=offset), result_type=PollResult
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise
        return None
    except WorkflowQueryFailedError:
        return None  # a run that is being replaced (continue-as-new) answers on its next run
    return result


async def _drain(
    handle: WorkflowHandle[object, object],
    topic: str,
    offset: int,
    result_type: type[T],
    converter: PayloadConverter,
) -> AsyncIterator[tuple[int, T]]:
    """The items a closed run still holds after ``offset`` (none when no worker can answer for it)."""
    while True:
        result = await _poll(handle, topic, offset)
        if result is None:
            return
        for item in result.items:
            yield item.offset, converter.from_payload(decode_item(item.data), result_type)
        offset = result.next_offset
        if not result.more_ready:
            return
