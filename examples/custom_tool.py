"""Your own tool next to the built-ins: an async function with typed arguments becomes a tool.

    python examples/custom_tool.py

It runs as its own activity (``tool:exchange_rate``) with a JSON Schema derived from its signature.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from temporalio.client import Client

from agent_tools import AgentToolsClient, AgentToolsPlugin, Settings, build_worker, run_and_exit, start_dev_server, tool
from agent_tools.testing import write_script


@tool
async def exchange_rate(base: str, quote: str = "EUR") -> str:
    """Exchange rate between two currencies."""
    rates = {("USD", "EUR"): 0.92, ("GBP", "EUR"): 1.17}
    rate = rates.get((base.upper(), quote.upper()))
    return f"1 {base} = {rate} {quote}" if rate else f"no rate for {base}/{quote}"


async def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        # A scripted model that calls the tool; point AGENT_TOOLS_MODEL at a real model to let it decide.
        model = os.environ.get("AGENT_TOOLS_MODEL") or write_script(
            Path(tmp) / "script.json",
            [
                {"say": "", "tool_calls": [{"name": "exchange_rate", "arguments": {"base": "USD"}}]},
                {"say": "Today {{last_tool}}."},
            ],
        )
        settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp}/store.sqlite", model=model, agents_file=None)
        env = await start_dev_server(ui=False)
        try:
            plugin = AgentToolsPlugin(settings, tools=[exchange_rate])
            temporal = await Client.connect(env.client.service_client.config.target_host, plugins=[plugin])
            async with build_worker(temporal, plugin):
                client = AgentToolsClient(temporal, settings)
                result = await client.run("How many euros is a dollar?", tools=["exchange_rate"])
                print(result.final_message)
                await client.close()
                return result.final_message or ""
        finally:
            await env.shutdown()


if __name__ == "__main__":
    # The Temporal core runtime's threads can abort the interpreter's finalization after the work is done
    # (temporalio/sdk-python#300, exit status 134 at random): leave with the real status, unfinalized.
    run_and_exit(lambda: asyncio.run(main()))
