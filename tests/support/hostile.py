"""Helpers of the hostile-input suite: run a scripted session, collect what it did, check its history."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.common import RawValue

from agent_tools._activity_io import ProgressEvent
from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._session import SessionResult

# Benign: the server refused a completion because new events (a signal, an activity result) had arrived; the
# SDK retries the task at once.
BENIGN_TASK_FAILURES = {WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND}
# Benign too: the SDK core's "nondeterminism" on a WorkflowTaskTimedOut event, which no workflow code makes (it
# is not a command's event). Under load the dev server sometimes fails to put a task on a worker's sticky queue
# ("should have a build ID directive on versioned sticky queue"), the task times out there, and the core takes
# the timeout event for a command's; the next attempt replays the same history and goes on.
CORE_TIMEOUT_MISREAD = "event_type: WorkflowTaskTimedOut"


@dataclass
class Outcome:
    handle: SessionHandle
    result: SessionResult | None
    progress: list[ProgressEvent] = field(default_factory=list)
    error: str | None = None

    def finished(self) -> dict[str, ProgressEvent]:
        """tool_finished events by call id."""
        return {str(e.data["call_id"]): e for e in self.progress if e.kind == "tool_finished"}


async def run_session(client: AgentToolsClient, prompt: str, *, timeout: float, **fields: Any) -> Outcome:
    """Start a session, follow its progress, and wait (at most ``timeout`` s) for its result."""
    handle = await client.start_session(prompt, **fields)
    outcome = Outcome(handle=handle, result=None)

    async def follow() -> None:
        async for event in handle.progress():
            outcome.progress.append(event)

    follower = asyncio.create_task(follow())
    try:
        outcome.result = await asyncio.wait_for(handle.result(), timeout)
    except Exception as exc:  # the test asserts on it: a hung or failed session is a finding, not a crash
        outcome.error = f"{type(exc).__name__}: {exc}"
    try:
        await asyncio.wait_for(follower, 10)
    except Exception:
        follower.cancel()
    return outcome


async def task_failures(temporal: Client, workflow_id: str) -> list[str]:
    """The workflow task failures of a workflow's history that are not the benign kind."""
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    found = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            attrs = event.workflow_task_failed_event_attributes
            if not benign_task_failure(attrs.cause, attrs.failure.message):
                found.append(f"{WorkflowTaskFailedCause.Name(attrs.cause)}: {attrs.failure.message[:300]}")
    return found


def benign_task_failure(cause: WorkflowTaskFailedCause.ValueType, message: str) -> bool:
    """Whether a workflow task failure is the server's or the SDK core's doing, retried, never the session's."""
    if cause in BENIGN_TASK_FAILURES:
        return True
    nondeterminism = cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
    return nondeterminism and "could not find a matching command" in message and CORE_TIMEOUT_MISREAD in message


async def tree_ids(client: AgentToolsClient, root_id: str) -> list[str]:
    """The root and every session under it (visibility, running or closed)."""
    query = f"SessionRootId = '{root_id}'"
    return [wf.id async for wf in client.temporal.list_workflows(query)] or [root_id]


async def signal_settled(
    handle: SessionHandle, signal: str, payload: RawValue, refused_update: tuple[str, Any]
) -> None:
    """Send ``signal``, then wait for a workflow task that has taken it: the update that follows, which its
    validator refuses, is delivered with every event before it. Large signals sent back to back pile up in
    the server's buffer while a task runs, and past its limit the server fails that task
    (FORCE_CLOSE_COMMAND) to flush them: the server's doing, not the session's (seen once in CI)."""
    await handle.workflow.signal(signal, payload)
    name, argument = refused_update
    try:
        await handle.workflow.execute_update(name, argument, result_type=dict)
    except WorkflowUpdateFailedError:
        return
    raise AssertionError(f"the settling update {name} was accepted")
