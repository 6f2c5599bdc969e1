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

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
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


# Waits between the tries to read a closed run's last items.
_DRAIN_BACKOFF = (0.2, 0.5, 1.0)


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
        run_id, length, status = await _length_of(temporal, workflow_id)
        seen = (run_id, length)
        if status in _CLOSED:
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


async def _length_of(temporal: Client, workflow_id: str) -> tuple[str, int, WorkflowExecutionStatus | None]:
    """The latest run's id, history length and status, from the raw describe: the SDK's describe also
    decodes the run's memo and search attributes, which was most of a follower's CPU."""
    info = (
        await temporal.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(
                namespace=temporal.namespace, execution=WorkflowExecution(workflow_id=workflow_id)
            ),
            retry=True,
        )
    ).workflow_execution_info
    status = WorkflowExecutionStatus(info.status) if info.status else None
    return info.execution.run_id, info.history_length, status


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
    """The items a closed run still holds after ``offset`` (none when no worker answers for it after a few
    tries: a closed run is answered by a replay, which a busy worker may not manage at the first ask)."""
    tries = 0
    while True:
        result = await _poll(handle, topic, offset)
        if result is None:
            tries += 1
            if tries > len(_DRAIN_BACKOFF):
                return
            await asyncio.sleep(_DRAIN_BACKOFF[tries - 1])
            continue
        for item in result.items:
            yield item.offset, converter.from_payload(decode_item(item.data), result_type)
        offset = result.next_offset
        if not result.more_ready:
            return
