"""A session scripted in Python: ``FunctionModel`` answers the model steps in the worker's process."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import AgentToolsClient
from agent_tools._messages import Message, ToolCall
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._user_tools import tool
from agent_tools._worker import build_worker
from agent_tools.testing import FunctionModel, ModelInfo


@tool
async def lookup(topic: str) -> str:
    """Return what is known about the topic."""
    return f"{topic} boils at 100 C"


async def test_a_function_model_drives_a_session_with_a_tool_call(
    temporal_env: WorkflowEnvironment, settings: Settings, tmp_path: Path
) -> None:
    seen: list[tuple[list[Message], ModelInfo]] = []

    def model(messages: list[Message], info: ModelInfo) -> Message | str:
        seen.append((messages, info))
        if info.step == 0:
            call = ToolCall(id="call-1", name="lookup", arguments={"topic": "water"})
            return Message(role="assistant", content="Looking it up.", tool_calls=[call])
        result = next(m for m in reversed(messages) if m.role == "tool")
        return f"Found: {result.content}"

    settings.model = "function:test"
    plugin = AgentToolsPlugin(settings, tools=[lookup], model_provider=FunctionModel(model))
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host, namespace=temporal_env.client.namespace, plugins=[plugin]
    )
    async with build_worker(client, plugin):
        agents = AgentToolsClient(temporal_env.client, settings)
        try:
            result = await agents.run("How hot does water boil?", tools=["lookup"])
        finally:
            await agents.close()

    assert (result.status, result.final_message) == (SessionStatus.completed, "Found: water boils at 100 C")
    assert [info.step for _, info in seen] == [0, 1]
    first, info = seen[0]
    assert info.spec == "function:test"
    offered = {t.name: t for t in info.tools}
    assert offered["lookup"].description == "Return what is known about the topic."
    assert offered["lookup"].parameters["properties"]["topic"]["type"] == "string"
    # The system text first (the agent's prompt, the memory note), then the prompt.
    assert {m.role for m in first[:-1]} == {"system"}
    assert (first[-1].role, first[-1].content) == ("user", "How hot does water boil?")
    # The second step sees the model's own call and the tool's result, bound to that call.
    second, _ = seen[1]
    assert [m.role for m in second[-2:]] == ["assistant", "tool"]
    assert second[-2].tool_calls[0].name == "lookup"
    assert (second[-1].tool_call_id, second[-1].content) == ("call-1", "water boils at 100 C")
