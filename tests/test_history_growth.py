"""History stays linear: a 200-step session's late steps cost about what its early steps cost."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from agent_tools._settings import Settings
from agent_tools._user_tools import tool
from tests.support.fixture_types import Script, WorkerFor


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


@tool
async def lookup(topic: str) -> str:
    """Return a paragraph about the topic."""
    return f"{topic}: " + "lorem ipsum dolor sit amet " * 40


async def test_200_step_session_history_bytes_per_step_stay_flat(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "repeat_last": True,
                "turns": [{"say": "checking", "tool_calls": [{"name": "lookup", "arguments": {"topic": "step"}}]}],
            }
        ]
    )
    async with worker_for(tools=[lookup]) as client:
        handle = await client.start_session("research", tools=["lookup"], max_steps=200)
        result = await handle.result()
        assert result.usage.calls == 200
        history = await handle.workflow.fetch_history()
    per_step = bytes_per_step(history)
    assert len(per_step) == 200
    early = sum(per_step[:20]) / 20
    late = sum(per_step[180:200]) / 20
    # Passing the whole conversation to each call would make late steps ~10x the early ones.
    assert late <= 1.5 * early, (early, late)
    assert late >= 0.5 * early, (early, late)  # and the measurement is real: steps are of like size
