"""The reference: the same agent loop as a minimal bare Temporal workflow that passes the whole message
list to every model call (the common design), with the same script played by its own few-line scripted
model and the same tool. It imports nothing of ours (tests/test_bench_reference.py holds it to that), so
the ratios bill our package's imports and memory to us."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from bench.bare_messages import BareInput, BareLlmInput, BareToolInput, Message, scripted_reply

__all__ = ["BareAgentLoop", "BareInput", "BareLlmInput", "BareToolInput", "bare_llm", "bare_lookup", "lookup"]


async def lookup(topic: str) -> str:
    """The tool both loops call."""
    return f"{topic}: " + "lorem ipsum dolor sit amet " * 40


@activity.defn(name="bare.llm")
async def bare_llm(inp: BareLlmInput) -> Message:
    return scripted_reply(inp.script, inp.messages)


@activity.defn(name="bare.lookup")
async def bare_lookup(inp: BareToolInput) -> str:
    return await lookup(inp.topic)


@workflow.defn(name="BareAgentLoop")
class BareAgentLoop:
    @workflow.run
    async def run(self, inp: BareInput) -> str:
        messages = [
            Message(role="system", content="You are a capable assistant."),
            Message(role="user", content=inp.prompt),
        ]
        for _ in range(inp.max_steps):
            reply = await workflow.execute_activity(
                bare_llm,
                BareLlmInput(script=inp.script, messages=messages),
                start_to_close_timeout=timedelta(minutes=5),
            )
            messages.append(reply)
            if not reply.tool_calls:
                return reply.content
            for call in reply.tool_calls:
                out = await workflow.execute_activity(
                    bare_lookup,
                    BareToolInput(topic=str(call.arguments.get("topic", ""))),
                    start_to_close_timeout=timedelta(minutes=5),
                )
                messages.append(Message(role="tool", tool_call_id=call.id, name=call.name, content=out))
        return messages[-1].content
