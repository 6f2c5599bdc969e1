"""The bare reference of bench/askuser_memory.py: a workflow waiting on a signal, nothing else. Its own
module, so the SDK's sandbox (on, as by default) re-imports only this per run."""

from __future__ import annotations

from temporalio import workflow


@workflow.defn(name="BareWaiter")
class BareWaiter:
    """What any waiting Temporal workflow costs a worker's cache."""

    def __init__(self) -> None:
        self.answer: str | None = None

    @workflow.run
    async def run(self, prompt: str) -> str:
        await workflow.wait_condition(lambda: self.answer is not None)
        return f"{prompt}: {self.answer}"

    @workflow.signal
    def answer_question(self, answer: str) -> None:
        self.answer = answer
