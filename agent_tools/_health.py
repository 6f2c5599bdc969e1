"""The worker's health endpoint for Kubernetes probes: ``/healthz`` (the process is up) and ``/readyz``
(connected to Temporal, the store answers, the worker polls its task queue).

A hand-written HTTP/1.1 responder on asyncio streams rather than a web framework: two GET routes with no
input but the path, in a process that otherwise serves no HTTP, so that probing the worker costs no thread,
no dependency and nothing on its event loop beyond a request line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.worker import Worker

from agent_tools._errors import ConfigurationError

__all__ = ["Health", "parse_bind", "serving"]

log = logging.getLogger(__name__)

CHECK_TIMEOUT_SECONDS = 5.0
_REQUEST_LINE_LIMIT = 4096
_HEADERS_LIMIT = 64


def parse_bind(value: str, *, what: str = "health") -> tuple[str, int]:
    """``HOST:PORT`` (``[::]:8080`` for IPv6) as a host and a port.

    Raises:
        ConfigurationError: the value is not HOST:PORT with a port from 0 to 65535.
    """
    host, sep, port = value.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigurationError(f"the {what} address {value!r} is not HOST:PORT (e.g. 0.0.0.0:8080)")
    return host, int(port)


@dataclass
class Health:
    """What ``/readyz`` checks; the worker fills it in as it starts (nothing is ready before that). The HTTP
    service, which polls no task queue, checks Temporal and the store alone (``polls=False``)."""

    client: Client | None = None
    worker: Worker | None = None
    store_ping: Callable[[], Awaitable[object]] | None = None
    polls: bool = True

    async def readiness(self) -> tuple[bool, dict[str, str]]:
        """Each check's word ("ok" or why not) and whether all hold."""
        checks = {"temporal": self._temporal, "store": self._store}
        if self.polls:
            checks["polling"] = self._polling
        results: dict[str, str] = {}
        for name, check in checks.items():
            try:
                results[name] = await asyncio.wait_for(check(), CHECK_TIMEOUT_SECONDS)
            except TimeoutError:
                results[name] = f"no answer within {CHECK_TIMEOUT_SECONDS:g} s"
            except Exception as exc:  # a probe reports; it never raises
                results[name] = " ".join(str(exc).split())[:300] or type(exc).__name__
        return all(v == "ok" for v in results.values()), results

    async def _temporal(self) -> str:
        if self.client is None:
            return "not connected yet"
        ok = await self.client.service_client.check_health(timeout=timedelta(seconds=CHECK_TIMEOUT_SECONDS))
        return "ok" if ok else "the server says its workflow service is not serving"

    async def _store(self) -> str:
        if self.store_ping is None:
            return "not open yet"
        await self.store_ping()
        return "ok"

    async def _polling(self) -> str:
        worker, client = self.worker, self.client
        if worker is None or client is None or not worker.is_running:
            return "the worker is not running"
        if worker.is_shutdown:
            return "the worker is shutting down"
        # The server's list of who polled the queue lately: this worker is on it once its pollers reach it.
        answer = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=worker.task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            ),
            timeout=timedelta(seconds=CHECK_TIMEOUT_SECONDS),
        )
        identity = worker.config().get("identity") or client.identity
        if any(p.identity == identity for p in answer.pollers):
            return "ok"
        return f"no poll from {identity} on task queue {worker.task_queue} reached the server yet"


@asynccontextmanager
async def serving(bind: str, health: Health) -> AsyncIterator[tuple[str, int]]:
    """Serve ``/healthz`` and ``/readyz`` on ``bind`` while the block runs; yields the bound address.

    Raises:
        ConfigurationError: the address is malformed or cannot be bound.
    """
    host, port = parse_bind(bind)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):  # a client that goes away or talks nonsense ends its own connection
            status, body = await _answer(reader, health)
            payload = json.dumps(body).encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        writer.close()

    try:
        server = await asyncio.start_server(handle, host, port, limit=_REQUEST_LINE_LIMIT)
    except OSError as exc:
        raise ConfigurationError(f"cannot serve the health endpoint on {bind}: {exc.strerror}") from exc
    bound = server.sockets[0].getsockname()
    log.info("health on http://%s:%s (/healthz, /readyz)", bound[0], bound[1])
    try:
        yield str(bound[0]), int(bound[1])
    finally:
        server.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.wait_closed(), 2)


async def _answer(reader: asyncio.StreamReader, health: Health) -> tuple[str, dict[str, Any]]:
    try:
        line = await asyncio.wait_for(reader.readline(), CHECK_TIMEOUT_SECONDS)
        for _ in range(_HEADERS_LIMIT):  # the headers say nothing these routes need
            if (await asyncio.wait_for(reader.readline(), CHECK_TIMEOUT_SECONDS)).strip() == b"":
                break
    except (ValueError, asyncio.LimitOverrunError):
        return "431 Request Header Fields Too Large", {"error": "request line or header too long"}
    parts = line.decode("latin-1").split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return "400 Bad Request", {"error": "not an HTTP request"}
    method, path = parts[0], parts[1].split("?", 1)[0]
    if method != "GET":
        return "405 Method Not Allowed", {"error": "GET only"}
    if path == "/healthz":
        return "200 OK", {"status": "ok"}
    if path == "/readyz":
        ready, checks = await health.readiness()
        return ("200 OK" if ready else "503 Service Unavailable"), {"ready": ready, "checks": checks}
    return "404 Not Found", {"error": "not found: /healthz and /readyz are served"}
