"""Everything in one process: the embedded Temporal dev server (with UI), a worker, and a client.

Used by ``agent-tools dev`` / ``run --embedded`` / ``demo``. The dev server keeps its state in a file under
``.agent-tools/`` so that runs stay browsable in the UI when ``agent-tools dev`` starts it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agent_tools._client import AgentToolsClient
from agent_tools._connection import connect
from agent_tools._devserver import start_dev_server
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._process_exit import exit_now
from agent_tools._settings import Settings

STATE_DIR = Path(".agent-tools")


def server_log_file(log_file: Path) -> Path:
    """Where the embedded dev server writes, beside the process's own log file."""
    return log_file.with_name("temporal.log")


def log_to_file(path: Path) -> None:
    """Send this process's logs to ``path`` instead of the terminal: Python's (the worker's, tracebacks of
    failed activities included), warnings, and the Temporal core's, which otherwise prints its own
    warnings to stderr (a worker stopped mid-poll, a server going away on Ctrl-C).

    Must run before the first Temporal client or server of the process: the core's logging is fixed when
    its runtime starts.
    """
    from temporalio.runtime import LogForwardingConfig, LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    core = LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="WARN"),
        forwarding=LogForwardingConfig(logger=logging.getLogger("temporalio.core")),
    )
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=core)), error_if_already_set=False)


@asynccontextmanager
async def embedded(
    settings: Settings,
    *,
    ui: bool = True,
    port: int | None = 7233,
    ui_port: int | None = 8233,
    persist: bool = True,
    log_file: Path | None = None,
    exit_on_cancel: bool = False,
) -> AsyncIterator[AgentToolsClient]:
    """Start the dev server, a worker on ``settings.task_queue``, and yield a connected client.

    With ``log_file``, the process logs there (see :func:`log_to_file`), not on the terminal. With
    ``exit_on_cancel`` (the CLI's Ctrl-C), a cancelled body stops the server and leaves the process at once
    with status 130: the terminal's SIGINT has reached the dev server too, and a worker shutting down
    gracefully would spend many seconds retrying to report its cancelled calls to a server that is gone.
    The session loses nothing: the server's database has it, and its running calls are retried when the
    server runs again.
    """
    from agent_tools._worker import build_worker

    if log_file is not None:
        log_to_file(log_file)

    db_file = None
    if persist:
        STATE_DIR.mkdir(exist_ok=True)  # noqa: ASYNC240 - once at start-up
        db_file = str(STATE_DIR / "temporal.db")
    # With the process's logs in a file, the server's go next to them: its banner repeated what the line
    # printed below says, and its log lines would land in the middle of the session's output.
    server_log = None if log_file is None else server_log_file(log_file)
    env = await start_dev_server(ui=ui, port=port, ui_port=ui_port, db_filename=db_file, output=server_log)
    try:
        target = env.client.service_client.config.target_host
        ui_url = f"http://{target.rsplit(':', 1)[0]}:{ui_port}" if ui and ui_port else settings.temporal_ui_url
        settings = settings.model_copy(update={"temporal_address": target, "temporal_ui_url": ui_url})
        plugin = await AgentToolsPlugin.create(settings)
        client = await connect(settings, plugins=[plugin], local_address=target)
        async with build_worker(client, plugin):
            agent_client = AgentToolsClient(client, settings)
            try:
                yield agent_client
            except asyncio.CancelledError:
                if exit_on_cancel:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(asyncio.shield(env.shutdown()), 5)
                    exit_now(130)
                raise
            finally:
                await agent_client.close()
    finally:
        await env.shutdown()
