"""History stays linear: a 200-step session's late steps cost about what its early steps cost."""

from __future__ import annotations

from agent_tools.history_metrics import bytes_per_step
from agent_tools.settings import Settings
from agent_tools.user_tools import tool
from tests.support.fixture_types import Script, WorkerFor


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
