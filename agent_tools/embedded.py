"""Everything in one process: the embedded Temporal dev server (with UI), a worker, and a client.

Used by ``agent-tools dev`` / ``run --embedded`` / ``demo``. The dev server keeps its state in a file under
``.agent-tools/`` so that runs stay browsable in the UI when ``agent-tools dev`` starts it again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from temporalio.client import Client

from agent_tools.client import AgentToolsClient
from agent_tools.devserver import start_dev_server
from agent_tools.plugin import AgentToolsPlugin
from agent_tools.settings import Settings

STATE_DIR = Path(".agent-tools")


@asynccontextmanager
async def embedded(
    settings: Settings, *, ui: bool = True, port: int | None = 7233, ui_port: int | None = 8233, persist: bool = True
) -> AsyncIterator[AgentToolsClient]:
    """Start the dev server, a worker on ``settings.task_queue``, and yield a connected client."""
    from agent_tools.worker import build_worker

    db_file = None
    if persist:
        STATE_DIR.mkdir(exist_ok=True)  # noqa: ASYNC240 - once at start-up
        db_file = str(STATE_DIR / "temporal.db")
    env = await start_dev_server(ui=ui, port=port, ui_port=ui_port, db_filename=db_file)
    try:
        target = env.client.service_client.config.target_host
        ui_url = f"http://{target.rsplit(':', 1)[0]}:{ui_port}" if ui and ui_port else settings.temporal_ui_url
        settings = settings.model_copy(update={"temporal_address": target, "temporal_ui_url": ui_url})
        plugin = await AgentToolsPlugin.create(settings)
        client = await Client.connect(target, namespace=settings.temporal_namespace, plugins=[plugin])
        async with build_worker(client, plugin):
            agent_client = AgentToolsClient(client, settings)
            try:
                yield agent_client
            finally:
                await agent_client.close()
    finally:
        await env.shutdown()
