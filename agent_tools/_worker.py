"""The worker: settings -> plugin -> client -> worker, until SIGTERM or Ctrl-C.

``agent-tools worker`` and the repository's ``worker.py`` script run :func:`main`; the embedded mode and the
tests build theirs with :func:`build_worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Mapping
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import unquote

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.runtime import OpenTelemetryConfig, PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import PollerBehaviorAutoscaling, Worker, WorkerDeploymentConfig

from agent_tools._connection import connect
from agent_tools._errors import ConfigurationError
from agent_tools._health import Health, parse_bind, serving
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
from agent_tools._version import package_version

STICKY_TIMEOUT_SECONDS = 3.0
# The longest a worker holds a heartbeat before it forwards it to the server: one every 2 s per running call.
HEARTBEAT_THROTTLE_SECONDS = 2.0


def build_worker(
    client: Client, plugin: AgentToolsPlugin, *, task_queue: str | None = None, **kwargs: object
) -> Worker:
    """A worker on ``client`` with everything the plugin registers (the plugin must be on the client)."""
    # A workflow task waits this long on its worker's sticky queue before any worker may take it: short, so
    # that a dead worker's sessions move on quickly; above a loaded worker's pick-up time, so that a live
    # worker's sessions are not replayed whole elsewhere (docs/benchmarks.md, the chaos bench).
    kwargs.setdefault("sticky_queue_schedule_to_start_timeout", timedelta(seconds=STICKY_TIMEOUT_SECONDS))
    # Heartbeats reach the server well inside the heartbeat timeout (5 s for model steps and tools), so a
    # loaded worker is never taken for dead; the SDK's default of 0.8 of the timeout leaves it 1 s.
    kwargs.setdefault("max_heartbeat_throttle_interval", timedelta(seconds=HEARTBEAT_THROTTLE_SECONDS))
    # Temporal's recommended poller setting ("Worker performance"): the server tells the worker how many
    # polls to keep open; a server before 1.28 sends no such feedback and the worker keeps its initial five.
    kwargs.setdefault("workflow_task_poller_behavior", PollerBehaviorAutoscaling())
    kwargs.setdefault("activity_task_poller_behavior", PollerBehaviorAutoscaling())
    if "build_id" not in kwargs and "deployment_config" not in kwargs:
        # Without one the SDK reads and hashes the code of every loaded module at each start. It only names
        # the worker unless the host versions its workers, and then the host passes its own.
        kwargs["build_id"] = f"agent-tools-{package_version()}"
    return Worker(
        client,
        task_queue=task_queue or plugin.settings.task_queue,
        max_concurrent_activities=int(kwargs.pop("max_concurrent_activities", 200)),  # type: ignore[call-overload]
        **kwargs,  # type: ignore[arg-type]
    )


async def main(settings: Settings | None = None) -> None:
    settings = settings or Settings()
    async with contextlib.AsyncExitStack() as stack:
        health = Health()
        if settings.health_bind:
            # First, so that a probe sees the process up (and not ready) while it connects and starts.
            await stack.enter_async_context(serving(settings.health_bind, health))
        await _run(settings, health)


async def _run(settings: Settings, health: Health) -> None:
    plugin = await AgentToolsPlugin.create(settings)
    runtime = telemetry_runtime(settings)
    client = await connect(settings, plugins=[plugin], runtime=runtime)
    health.client = client
    if settings.search_attributes:
        # Before the worker starts, so that a server that lacks them and cannot take them is one clear line.
        await plugin.ensure_search_attributes(client)
    grace = settings.worker_shutdown_grace_seconds
    versioning = deployment_config(settings)
    kwargs: dict[str, Any] = {"graceful_shutdown_timeout": timedelta(seconds=grace)}
    if versioning is not None:
        kwargs["deployment_config"] = versioning
    worker = build_worker(client, plugin, **kwargs)
    health.worker, health.store_ping = worker, partial(_ping_store, plugin)
    # A deploy stops workers with SIGTERM: finish what is in flight instead of dying mid-call, which would
    # leave each running activity to be noticed only at its heartbeat timeout and to repeat its side effects.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    target = client.service_client.config.target_host
    logging.info("worker on task queue %s at %s, namespace %s", settings.task_queue, target, client.namespace)
    if versioning is not None:
        version = versioning.version
        logging.info(
            "worker deployment %s, build %s; sessions %s", version.deployment_name, version.build_id,
            settings.session_versioning,
        )  # fmt: skip
    async with worker:
        await stop.wait()
        logging.info("stopping: no new tasks; in-flight activities have up to %g s to finish", grace)
    logging.info("worker stopped")


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """The worker's Worker Deployment version when ``settings.deployment_name`` is set, else None."""
    if not settings.deployment_name:
        return None
    behavior = {"pinned": VersioningBehavior.PINNED, "auto_upgrade": VersioningBehavior.AUTO_UPGRADE}
    build_id = settings.deployment_build_id or package_version()
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=settings.deployment_name, build_id=build_id),
        use_worker_versioning=True,
        # Every workflow the worker runs (sessions, their sub-agents) takes this behaviour; none sets its own.
        default_versioning_behavior=behavior[settings.session_versioning],
    )


def telemetry_runtime(settings: Settings, environ: Mapping[str, str] | None = None) -> Runtime | None:
    """The runtime that exports the worker's metrics: Prometheus at ``settings.metrics_bind``; else, with
    tracing on, OTLP over HTTP to the collector the traces go to; else None (the SDK's default, no metrics)."""
    if settings.metrics_bind:
        return metrics_runtime(settings.metrics_bind)
    if settings.tracing:
        return otlp_metrics_runtime(os.environ if environ is None else environ)
    return None


def otlp_metrics_runtime(environ: Mapping[str, str]) -> Runtime:
    """Metrics to the OTLP/HTTP collector named by the OpenTelemetry variables the trace exporter reads
    (``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` + ``/v1/metrics``, else
    localhost:4318; ``OTEL_EXPORTER_OTLP_HEADERS``)."""
    url = environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or (
        (environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "http://localhost:4318").rstrip("/") + "/v1/metrics"
    )
    raw = environ.get("OTEL_EXPORTER_OTLP_METRICS_HEADERS") or environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    headers = dict(
        (unquote(k.strip()), unquote(v.strip())) for k, _, v in (h.partition("=") for h in raw.split(",")) if k.strip()
    )
    from agent_tools import _metrics as metrics

    config = OpenTelemetryConfig(
        url=url,
        headers=headers or None,
        http=True,
        histogram_bucket_overrides={metrics.MODEL_COST: list(metrics.COST_BUCKETS_USD)},
    )
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=config))
    except Exception as exc:  # the core's error for a URL it cannot use
        raise ConfigurationError(f"cannot export metrics to {url}: {' '.join(str(exc).split())}") from exc


def metrics_runtime(bind: str) -> Runtime:
    """A Temporal runtime whose Prometheus endpoint serves ``/metrics`` on ``bind``: the SDK's metrics and
    ours, which go through the SDK's meters (agent_tools._metrics), on the worker and client built on it.

    Raises:
        ConfigurationError: the address is malformed or cannot be bound.
    """
    from agent_tools import _metrics as metrics

    host, port = parse_bind(bind, what="metrics")
    config = PrometheusConfig(
        bind_address=f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        histogram_bucket_overrides={metrics.MODEL_COST: list(metrics.COST_BUCKETS_USD)},
    )
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=config))
    except Exception as exc:  # the core's error for an address it cannot bind
        raise ConfigurationError(f"cannot serve metrics on {bind}: {' '.join(str(exc).split())}") from exc


async def _ping_store(plugin: AgentToolsPlugin) -> None:
    """One round trip to the worker's store (opened with its services, which the worker opens anyway)."""
    services = await plugin.holder.get()
    await services.store.ping()
