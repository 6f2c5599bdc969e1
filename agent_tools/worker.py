"""The worker: settings -> plugin -> client -> worker, until SIGTERM or Ctrl-C.

``agent-tools worker`` and the repository's ``worker.py`` script run :func:`main`; the embedded mode and the
tests build theirs with :func:`build_worker`.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import PollerBehaviorAutoscaling, Worker

from agent_tools.client import unreachable
from agent_tools.plugin import AgentToolsPlugin
from agent_tools.settings import Settings

STICKY_TIMEOUT_SECONDS = 3.0
# The longest a worker holds a heartbeat before it forwards it to the server: one every 2 s per running call.
HEARTBEAT_THROTTLE_SECONDS = 2.0


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("durable-agent-tools")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "dev"


def build_worker(
    client: Client, plugin: AgentToolsPlugin, *, task_queue: str | None = None, **kwargs: object
) -> Worker:
    """A worker on ``client`` with everything the plugin registers (the plugin must be on the client)."""
    # A workflow task waits this long on a worker's own (sticky) queue before any worker may take it. With
    # the SDK's 10 s, every session cached on a SIGKILLed worker stalled 10 s at its next task. A live
    # worker picks its sticky tasks up in milliseconds, but on the 2-core machine at load 12-15 the p99 of
    # a fault-free run was 1.6-2.3 s, the longest 2.6 s (bench/chaos.py prints them): 2 s would send those
    # to the shared queue, to be replayed whole by whichever worker takes them.
    kwargs.setdefault("sticky_queue_schedule_to_start_timeout", timedelta(seconds=STICKY_TIMEOUT_SECONDS))
    # The SDK forwards a heartbeat at most every 0.8 of the heartbeat timeout (4 of the model steps' and
    # tools' 5 s), which leaves a loaded worker 1 s before the server takes it for dead and runs the call
    # again; at most every 2 s leaves it 3 s, for one small RPC per running call every 2 s.
    kwargs.setdefault("max_heartbeat_throttle_interval", timedelta(seconds=HEARTBEAT_THROTTLE_SECONDS))
    # Temporal's recommended poller setting (docs.temporal.io, "Worker performance"): the server tells the
    # worker how many polls to keep open, where the SDK's default holds five whatever the load. A burst of 200
    # events woke its sessions with their next step scheduled at p50 1.4-1.8x a raw signal's latency against
    # 1.8-2.1x with the fixed five (bench/events_ingress.py, alternating; the raw reference's own figures did
    # not move with it). A server before 1.28 sends no such feedback and the worker keeps its initial five.
    kwargs.setdefault("workflow_task_poller_behavior", PollerBehaviorAutoscaling())
    kwargs.setdefault("activity_task_poller_behavior", PollerBehaviorAutoscaling())
    if "build_id" not in kwargs and "deployment_config" not in kwargs:
        # Without one the SDK derives a build id by reading and hashing the code of every loaded module at
        # every start. It only names the worker unless the host versions its workers, and then the host
        # passes its own.
        kwargs["build_id"] = f"agent-tools-{_package_version()}"
    return Worker(
        client,
        task_queue=task_queue or plugin.settings.task_queue,
        max_concurrent_activities=int(kwargs.pop("max_concurrent_activities", 200)),  # type: ignore[call-overload]
        **kwargs,  # type: ignore[arg-type]
    )


async def main(settings: Settings | None = None) -> None:
    settings = settings or Settings()
    plugin = await AgentToolsPlugin.create(settings)
    try:
        client = await Client.connect(
            settings.temporal_address, namespace=settings.temporal_namespace, plugins=[plugin]
        )
    except RuntimeError as exc:
        raise unreachable(settings, exc) from exc
    if settings.search_attributes:
        # Before the worker starts, so that a server that lacks them and cannot take them is one clear line.
        await plugin.ensure_search_attributes(client)
    grace = settings.worker_shutdown_grace_seconds
    worker = build_worker(client, plugin, graceful_shutdown_timeout=timedelta(seconds=grace))
    # A deploy stops workers with SIGTERM: finish what is in flight instead of dying mid-call, which would
    # leave each running activity to be noticed only at its heartbeat timeout and to repeat its side effects.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    logging.info("worker on task queue %s at %s", settings.task_queue, settings.temporal_address)
    async with worker:
        await stop.wait()
        logging.info("stopping: no new tasks; in-flight activities have up to %g s to finish", grace)
    logging.info("worker stopped")
