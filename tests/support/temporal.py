"""Running a worker with the plugin against a test's Temporal server, and moving the time-skipping
server's clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from agent_tools._agents import AgentDefinition, AgentRegistry
from agent_tools._client import AgentToolsClient
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
from agent_tools._worker import build_worker


async def skip_time(
    env: WorkflowEnvironment, duration: float | timedelta, *, within: float = 120.0, still: float = 10.0
) -> None:
    """``env.sleep`` that survives its own RPC failing. The test server moves its clock only while nothing
    holds it (a workflow task in flight does), and the client gives any call 30 s, so on a loaded machine the
    call can time out, or its HTTP/2 stream break, while the server still moves towards the target. After a
    failed call this waits for the server's clock to reach the target; if the clock stands still for
    ``still`` seconds (the server's sleep ended with the call), it sleeps again for what is left, until
    ``within`` seconds have passed."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    target = await env.get_current_time() + timedelta(seconds=seconds)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    failures: list[str] = []
    while (now := await env.get_current_time()) < target:
        assert loop.time() < deadline, f"the clock did not reach {target} within {within} s: {failures}"
        try:
            await env.sleep((target - now).total_seconds())
            return
        except RPCError as err:
            failures.append(err.message[:200])
        still_since, last = loop.time(), await env.get_current_time()
        while last < target and loop.time() - still_since < still:
            assert loop.time() < deadline, f"the clock did not reach {target} within {within} s: {failures}"
            await asyncio.sleep(0.2)
            current = await env.get_current_time()
            if current != last:
                still_since, last = loop.time(), current


@asynccontextmanager
async def running_worker(
    env: WorkflowEnvironment,
    settings: Settings,
    *,
    tools: Sequence[Any] = (),
    agents: Sequence[AgentDefinition] | None = None,
    **worker_kwargs: Any,
) -> AsyncIterator[AgentToolsClient]:
    """A worker with the plugin on ``settings.task_queue``; yields a client bound to the same settings."""
    plugin = AgentToolsPlugin(settings, tools=tools, agents=AgentRegistry(list(agents)) if agents else None)
    client = await Client.connect(
        env.client.service_client.config.target_host, namespace=env.client.namespace, plugins=[plugin]
    )
    async with build_worker(client, plugin, **worker_kwargs):
        # Sessions are driven through the environment's own client: on the time-skipping server only that
        # client skips time while a test awaits a result.
        agent_client = AgentToolsClient(env.client, settings)
        try:
            yield agent_client
        finally:
            await agent_client.close()
