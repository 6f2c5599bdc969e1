"""Reading a running session from a test: its queries, its progress, its transcript, its run chain."""

from __future__ import annotations

from typing import Any

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from agent_tools._activity_io import ProgressEvent
from agent_tools._client import SessionHandle
from agent_tools._session import SessionStatus
from agent_tools.contracts._delegation import ChildRecord
from agent_tools.contracts._planning import Loop


async def runs(temporal: Client, session_id: str) -> list[str]:
    """The run ids of the chain, oldest first: walked back from the latest run through each run's start
    event (visibility listings may lag behind on a loaded machine)."""
    run_id = (await temporal.get_workflow_handle(session_id).describe()).run_id
    chain: list[str] = []
    while run_id:
        chain.insert(0, run_id)
        history = await temporal.get_workflow_handle(session_id, run_id=run_id).fetch_history()
        run_id = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id
    return chain


async def current_details(handle: SessionHandle) -> str:
    """What the Temporal UI shows as the workflow's current details."""
    meta = await handle.workflow.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return str(meta.current_details)


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def loops(handle: SessionHandle) -> list[Loop]:
    result: list[Loop] = await handle.workflow.query("loops", result_type=list[Loop])
    return result


async def children(handle: SessionHandle) -> list[ChildRecord]:
    result: list[ChildRecord] = await handle.query("subagents", list[ChildRecord])
    return result


async def collect_progress(handle: SessionHandle) -> list[ProgressEvent]:
    return [e async for e in handle.progress()]


def tool_results(entries: list[Any]) -> list[str]:
    return [e.content for e in entries if e.role == "tool"]


async def turns(handle: SessionHandle, n: int) -> bool:
    s = await handle.status()
    return s.turns >= n and s.status == SessionStatus.idle
