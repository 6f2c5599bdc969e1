"""The service's metrics, as Prometheus text at ``AGENT_TOOLS_SERVICE__METRICS_BIND`` (``/metrics``): the
Temporal client's own ``temporal_*`` and these, recorded through the same runtime's meter:

* ``agent_tools_http_requests`` {route, method, status}: requests answered;
* ``agent_tools_http_request_seconds`` {route, method}: from a request to the end of its answer (for an
  event stream or an AG-UI run, its whole life);
* ``agent_tools_http_streams_open`` {route}: event streams and AG-UI runs open now.

``route`` is the matched route's template (``/sessions/{session_id}/events``), or ``unmatched``, and
``method`` one of the HTTP methods or ``other``: whatever paths and methods a client makes up, the series
stay few.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from temporalio.common import MetricMeter

__all__ = [
    "HTTP_REQUESTS",
    "HTTP_REQUEST_SECONDS",
    "HTTP_STREAMS_OPEN",
    "UNCOUNTED_CLIENT",
    "RequestMetrics",
    "route_label",
]

HTTP_REQUESTS = "agent_tools_http_requests"
HTTP_REQUEST_SECONDS = "agent_tools_http_request_seconds"
HTTP_STREAMS_OPEN = "agent_tools_http_streams_open"

# The client address of the service's own in-process requests (its warm-up), which are not counted: no peer
# on a socket has it.
UNCOUNTED_CLIENT = ("agent-tools-warm-up", 0)

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


def route_label(scope: Scope) -> str:
    """The template of the route that took the request, or ``unmatched``."""
    route = scope.get("route")
    template = getattr(route, "path_format", None)
    return template if isinstance(template, str) else "unmatched"


class RequestMetrics:
    """ASGI middleware that counts and times every HTTP request on ``meter``."""

    def __init__(self, app: ASGIApp, meter: MetricMeter) -> None:
        self.app = app
        self.requests = meter.create_counter(HTTP_REQUESTS, "HTTP requests answered")
        self.seconds = meter.create_histogram_float(HTTP_REQUEST_SECONDS, "HTTP request duration", "s")
        self.streams = meter.create_gauge(HTTP_STREAMS_OPEN, "Event streams and AG-UI runs open")
        self.open: Counter[str] = Counter()

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        if scope["type"] != "http" or tuple(scope.get("client") or ()) == UNCOUNTED_CLIENT:
            await self.app(scope, receive, send)
            return
        began, status, stream = time.monotonic(), 500, None

        async def sending(message: Message) -> None:
            nonlocal status, stream
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = dict(message.get("headers") or [])
                if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                    stream = route_label(scope)
                    self._opened(stream, 1)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = route_label(scope)
            method = str(scope.get("method", "")).upper()
            attributes = {"route": route, "method": method if method in _METHODS else "other"}
            self.requests.add(1, {**attributes, "status": str(status)})
            self.seconds.record(time.monotonic() - began, attributes)
            if stream is not None:
                self._opened(stream, -1)

    def _opened(self, route: str, change: int) -> None:
        self.open[route] += change
        self.streams.set(self.open[route], {"route": route})
