"""Workflow-history measurements: bytes per model step. Used by the history test and the benchmark."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory


def bytes_per_step(history: WorkflowHistory, llm_activity: str = "agent_tools.llm_step") -> list[int]:
    """History bytes of each model step: from one model-step activity's scheduling to the next."""
    spans: list[int] = []
    current: int | None = None
    for event in history.events:
        if (
            event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and event.activity_task_scheduled_event_attributes.activity_type.name == llm_activity
        ):
            if current is not None:
                spans.append(current)
            current = 0
        if current is not None:
            current += event.ByteSize()
    if current is not None:
        spans.append(current)
    return spans


def total_bytes(history: WorkflowHistory) -> int:
    return sum(e.ByteSize() for e in history.events)
