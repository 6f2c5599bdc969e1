"""OpenTelemetry traces of sessions, turns, model calls and tool calls. Opt-in: ``AGENT_TOOLS_TRACING=true``
(``Settings.tracing``).

With tracing on, the plugin adds temporalio's ``OpenTelemetryInterceptor`` to the client and its workers,
which carries the trace context through every workflow start, activity, child workflow and signal, so the
spans of a session tree join into one trace across workflows, activities and worker processes:

```
invoke_agent assistant                 the session (INTERNAL; gen_ai.agent.name, gen_ai.conversation.id,
│                                      gen_ai.provider.name, gen_ai.request.model)
└── turn 1                             one turn (agent_tools.turn, agent_tools.trigger)
    ├── chat gpt-4.1-mini              a model call (CLIENT, inside the llm_step activity; gen_ai.request.model,
    │                                  server.address, server.port, gen_ai.usage.input_tokens /
    │                                  output_tokens, gen_ai.response.finish_reasons, agent_tools.cost_usd)
    ├── execute_tool webSearch         a tool call (INTERNAL; gen_ai.tool.name, gen_ai.tool.call.id,
    │                                  gen_ai.tool.type)
    └── execute_tool subAgent
        └── invoke_agent researcher    the sub-agent's session, in its own workflow
            └── turn 1 ...
```

Names, span kinds and attributes follow OpenTelemetry's GenAI semantic conventions, v1.37.0
(``gen_ai.provider.name``, not the older ``gen_ai.system``); a failed call carries ``error.type``. The cost has
no convention and is ``agent_tools.cost_usd``. A host that configured temporalio's ``OpenTelemetryInterceptor``
itself (with ``add_temporal_spans=True``, say) keeps it: the plugin then adds none of its own, so a model
call's span sits under the host's ``RunActivity:agent_tools.llm_step`` span. Workflow spans need the replay-safe tracer provider of
``temporalio.contrib.opentelemetry.create_tracer_provider`` (a replayed workflow must not emit its spans
twice): when the process has none, :func:`interceptor` installs one, exporting over OTLP when
``opentelemetry-exporter-otlp`` is installed (configured by the usual ``OTEL_EXPORTER_OTLP_*`` variables).
A process that set up its own should build it with ``create_tracer_provider``.

Pure on the workflow side: spans are started only when tracing is enabled, and no I/O happens here (the
exporter runs in the SDK's span processor). Needs ``pip install 'durable-agent-tools[tracing]'``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Literal
from urllib.parse import urlsplit

from temporalio.workflow import ContinueAsNewError

from agent_tools._errors import ConfigurationError

__all__ = [
    "TRACER_NAME",
    "SpanKind",
    "enable",
    "enabled",
    "interceptor",
    "is_tracing_interceptor",
    "server_of",
    "set_attributes",
    "span",
    "tool_type",
]

log = logging.getLogger(__name__)

TRACER_NAME = "agent_tools"

# The conventions' span kinds we use: CLIENT for a call to a model server, INTERNAL for work in process.
SpanKind = Literal["client", "internal"]

# Process-wide: set once by the plugin of a worker or client with tracing on. Workflow code reads it to
# decide whether to open spans; the commands a workflow issues are the same either way.
_state = {"enabled": False}


def enable() -> None:
    _state["enabled"] = True


def enabled() -> bool:
    return _state["enabled"]


def _attributes(values: Mapping[str, Any]) -> dict[str, Any]:
    # OpenTelemetry takes str, bool, int, float (and sequences of them); None means "not known".
    return {k: v for k, v in values.items() if isinstance(v, (str, bool, int, float)) or _is_str_list(v)}


def _is_str_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


@contextlib.contextmanager
def span(name: str, attributes: Mapping[str, Any] | None = None, *, kind: SpanKind = "internal") -> Iterator[None]:
    """A span around the block when tracing is on; nothing otherwise. An exception leaving the block sets
    ``error.type`` (its class name) and the error status, as the conventions ask."""
    if not _state["enabled"]:
        yield
        return
    from opentelemetry import trace

    otel_kind = trace.SpanKind.CLIENT if kind == "client" else trace.SpanKind.INTERNAL
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(
        name,
        attributes=_attributes(attributes or {}),
        kind=otel_kind,
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield
        except ContinueAsNewError:
            raise  # the session goes on in a new run: not an error
        except Exception as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__qualname__))
            raise


def server_of(base_url: str | None) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of a model endpoint's URL (empty when it has no host)."""
    if not base_url:
        return {}
    try:
        parts = urlsplit(base_url)
        port = parts.port
    except ValueError:
        return {}
    if not parts.hostname:
        return {}
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return {"server.address": parts.hostname, "server.port": port}


def set_attributes(attributes: Mapping[str, Any]) -> None:
    """Attributes on the current span (known only at its end: tokens, cost, finish reasons)."""
    if not _state["enabled"]:
        return
    from opentelemetry import trace

    trace.get_current_span().set_attributes(_attributes(attributes))


# gen_ai.tool.type: "datastore" reads or writes stored knowledge, "function" is answered on the client's
# side (a person), "extension" is everything the agent's side runs against the world (host and MCP tools too).
_DATASTORE_CAPABILITIES = frozenset({"memory", "results", "history"})
_CLIENT_SIDE_CAPABILITIES = frozenset({"human"})


def tool_type(capability: str | None) -> str:
    """The conventions' ``gen_ai.tool.type`` of a tool of ``capability`` (None: a host or MCP tool)."""
    if capability in _DATASTORE_CAPABILITIES:
        return "datastore"
    if capability in _CLIENT_SIDE_CAPABILITIES:
        return "function"
    return "extension"


def is_tracing_interceptor(value: object) -> bool:
    """Whether ``value`` is temporalio's OpenTelemetry interceptor (a host's or ours)."""
    cls = type(value)
    return cls.__name__ == "OpenTelemetryInterceptor" and cls.__module__.startswith("temporalio.contrib.opentelemetry")


def interceptor() -> Any:
    """temporalio's OpenTelemetry interceptor, with a replay-safe tracer provider in place.

    Raises:
        ConfigurationError: the OpenTelemetry SDK is missing, or the process set a tracer provider that
            replaying workflows would use wrongly.
    """
    try:
        from opentelemetry import trace
        from temporalio.contrib.opentelemetry import (
            OpenTelemetryInterceptor,
            ReplaySafeTracerProvider,
            create_tracer_provider,
        )
    except ImportError as exc:
        raise ConfigurationError(
            f"tracing needs the OpenTelemetry SDK ({exc}): pip install 'durable-agent-tools[tracing]'"
        ) from exc
    current = trace.get_tracer_provider()
    if not isinstance(current, ReplaySafeTracerProvider):
        if type(current).__name__ != "ProxyTracerProvider":
            raise ConfigurationError(
                "tracing needs a replay-safe tracer provider: build yours with "
                "temporalio.contrib.opentelemetry.create_tracer_provider() before the plugin is created"
            )
        provider = create_tracer_provider()
        _add_otlp_exporter(provider)
        trace.set_tracer_provider(provider)
    enable()
    return OpenTelemetryInterceptor(add_temporal_spans=False)


def _add_otlp_exporter(provider: Any) -> None:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "tracing is on but no exporter is installed: spans are dropped "
            "(pip install opentelemetry-exporter-otlp, or set a provider of your own)"
        )
        return
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
