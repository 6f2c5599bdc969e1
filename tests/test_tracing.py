"""OpenTelemetry traces (AGENT_TOOLS_TRACING): the span tree of a session with a sub-agent, joined across
workflows and activities by temporalio's interceptor, with GenAI attributes on the model calls."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_tools import _tracing as tracing
from agent_tools._session import SessionStatus
from agent_tools._settings import Price, Settings
from tests.support.fixture_types import Script, WorkerFor

otel_trace = pytest.importorskip("opentelemetry.trace")
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from temporalio.contrib.opentelemetry import ReplaySafeTracerProvider, create_tracer_provider  # noqa: E402

_EXPORTER = InMemorySpanExporter()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    # A process has one global tracer provider: set it once (replay-safe, as workflow spans need).
    if not isinstance(otel_trace.get_tracer_provider(), ReplaySafeTracerProvider):
        provider = create_tracer_provider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        otel_trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    try:
        yield _EXPORTER
    finally:
        tracing._state["enabled"] = False  # the other tests of this process run untraced


SCRIPT = [
    {"match": {"title": "Dates"}, "turns": [{"say": "Go in May."}]},
    {
        "turns": [
            {
                "say": "Planning.",
                "tool_calls": [
                    {"name": "todoWrite", "arguments": {"todos": [{"content": "ask", "status": "in_progress"}]}},
                    {"name": "subAgent", "arguments": {"title": "Dates", "instruction": "When?", "mode": "sync"}},
                ],
            },
            {"say": "May it is."},
        ]
    },
]


async def test_span_tree_of_a_session_with_a_sub_agent(
    settings: Settings, script: Script, worker_for: WorkerFor, spans: InMemorySpanExporter
) -> None:
    settings.model = script(SCRIPT)
    settings.prices = {settings.model: Price(input_per_mtok=1000.0, output_per_mtok=2000.0)}
    settings.tracing = True
    async with worker_for() as client:
        handle = await client.start_session("plan a trip")
        result = await handle.result()
    assert result.status == SessionStatus.completed
    finished: list[ReadableSpan] = list(spans.get_finished_spans())
    by_id = {s.context.span_id: s for s in finished}

    def parent(s: ReadableSpan) -> ReadableSpan | None:
        return by_id.get(s.parent.span_id) if s.parent else None

    def children(s: ReadableSpan, name: str) -> list[ReadableSpan]:
        return [c for c in finished if parent(c) is s and c.name == name]

    roots = [s for s in finished if s.name == "invoke_agent assistant" and parent(s) is None]
    assert len(roots) == 1, [(s.name, parent(s) and parent(s).name) for s in finished]  # type: ignore[union-attr]
    root = roots[0]
    assert root.attributes is not None and root.attributes["gen_ai.conversation.id"] == handle.id
    assert len({s.context.trace_id for s in finished if s.name != "invoke_agent assistant" or s is root}) == 1
    (turn,) = children(root, "turn 1")
    model = settings.model.split(":", 1)[1]
    chats = children(turn, f"chat {model}")
    assert len(chats) == 2  # the two model steps of the turn, from inside the llm_step activity
    for chat in chats:
        attrs = chat.attributes or {}
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "scripted"
        assert int(attrs["gen_ai.usage.input_tokens"]) > 0 and int(attrs["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]
        assert float(attrs["agent_tools.cost_usd"]) > 0  # type: ignore[arg-type]
    (todo,) = children(turn, "execute_tool todoWrite")
    assert (todo.attributes or {})["gen_ai.tool.call.id"] == "call_0_0"
    (delegation,) = children(turn, "execute_tool subAgent")
    (child,) = children(delegation, "invoke_agent assistant")  # the sub-agent's own workflow
    assert (child.attributes or {})["agent_tools.parent_id"] == handle.id
    assert (child.attributes or {})["agent_tools.depth"] == 1
    (child_turn,) = children(child, "turn 1")
    assert len(children(child_turn, f"chat {model}")) == 1
    # Spans have real durations: the delegation contains the sub-agent's whole session.
    assert delegation.start_time <= child.start_time and child.end_time <= delegation.end_time  # type: ignore[operator]


def test_tracing_is_off_unless_asked(settings: Settings) -> None:
    from agent_tools._plugin import AgentToolsPlugin

    assert settings.tracing is False
    AgentToolsPlugin(settings)
    assert not tracing.enabled()
