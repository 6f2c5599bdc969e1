"""A worker process with one slow tool that needs approval, for tests/test_approval_crash.py to SIGKILL.

The tool appends a line to ``$APPROVAL_MARKER`` when it starts, then takes ``$APPROVAL_TOOL_SECONDS``: a
test that kills the worker meanwhile can count how many times the tool really ran.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from temporalio.client import Client

from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
from agent_tools._user_tools import tool
from agent_tools._worker import build_worker


@tool(description="Send a payment (slowly)", requires_approval=True)  # type: ignore[untyped-decorator]
async def slow_payment(to: str, amount: int) -> str:
    with Path(os.environ["APPROVAL_MARKER"]).open("a") as marker:
        marker.write(f"{to} {amount}\n")
    await asyncio.sleep(float(os.environ.get("APPROVAL_TOOL_SECONDS", "30")))
    return f"sent {amount} to {to}"


async def main() -> None:
    settings = Settings()
    plugin = AgentToolsPlugin(settings, tools=[slow_payment])
    client = await Client.connect(settings.temporal_address, plugins=[plugin])
    async with build_worker(client, plugin):
        await asyncio.Event().wait()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    asyncio.run(main())
