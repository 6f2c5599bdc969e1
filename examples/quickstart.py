"""Quickstart: a worker and a session in one script, on the embedded Temporal dev server.

    python examples/quickstart.py

Follows the session's live progress and answers its question (askUser) from code. Uses the scripted demo
model unless AGENT_TOOLS_MODEL / OPENAI_API_KEY / ANTHROPIC_API_KEY is set.
"""

from __future__ import annotations

import asyncio
import os

from agent_tools import Settings, embedded, run_and_exit


async def main() -> str:
    port = int(os.environ.get("EXAMPLE_TEMPORAL_PORT", "7233"))
    ui_port = int(os.environ.get("EXAMPLE_UI_PORT", "8233"))
    async with embedded(Settings(), port=port, ui_port=ui_port, persist=False) as client:
        handle = await client.start_session("Plan a three-day trip to Lisbon", agent="assistant")
        async for event in handle.progress():
            if event.kind == "tool_started":
                print("tool:", event.data["tool"])
            elif event.kind == "question":
                # Answer every pending question with its first option (a person would choose).
                pending = await handle.pending_questions()
                await handle.answer_questions({q.question: q.options[0].label for q in pending})
                print("answered:", [q.question for q in pending])
        result = await handle.result()
        print(result.final_message)
        print("Temporal UI:", handle.ui_url())
        return result.final_message or ""


if __name__ == "__main__":
    # The Temporal core runtime's threads can abort the interpreter's finalization after the work is done
    # (temporalio/sdk-python#300, exit status 134 at random): leave with the real status, unfinalized.
    run_and_exit(lambda: asyncio.run(main()))
