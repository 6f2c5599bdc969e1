"""The same scripted work on Pydantic AI's Temporal integration (``TemporalDurability``), for bench/peers.py.

A ``FunctionModel`` plays the scripted model: it calls ``lookup`` once per step until the script's number
of steps is done, then answers ``done``. Needs the ``bench`` extra (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import workflow

from bench.bare_loop import lookup as bare_lookup


class PeerInput(BaseModel):
    prompt: str
    steps: int


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Step i calls lookup(topic=f"t{i}") as the engine's and the bare loop's scripts do; then ``done``."""
    done = sum(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", []))
    # The prompt carries the number of tool steps: one agent serves every configuration.
    first = messages[0]
    wanted = int(str(getattr(first.parts[-1], "content", "0")).rsplit(" ", 1)[-1]) if first.parts else 0
    if done < wanted:
        return ModelResponse(parts=[ToolCallPart("lookup", {"topic": f"t{done}"}, tool_call_id=f"call-{done}")])
    return ModelResponse(parts=[TextPart("done")])


agent = Agent(
    FunctionModel(scripted),
    name="peer",
    instructions="You are a capable assistant.",
    capabilities=[TemporalDurability()],
)


@agent.tool_plain
async def lookup(topic: str) -> str:
    """The tool all three loops call."""
    return await bare_lookup(topic)


@workflow.defn(name="PeerAgent")
class PeerAgent(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]

    @workflow.run
    async def run(self, inp: PeerInput) -> str:
        result = await agent.run(f"{inp.prompt} {inp.steps}")
        return str(result.output)
