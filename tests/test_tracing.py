"""OpenTelemetry traces (AGENT_TOOLS_TRACING): the span tree of a session with a sub-agent, joined across
workflows and activities by temporalio's interceptor, with GenAI attributes on the model calls."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from agent_tools import _tracing as tracing
from agent_tools._client import AgentToolsClient
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._session import SessionStatus
from agent_tools._settings import Price, ProviderEndpoint, Settings
from agent_tools._worker import build_worker
from tests.support.fake_llm import Reply, fake_llm_server, openai_reply
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually

otel_trace = pytest.importorskip("opentelemetry.trace")
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from temporalio.contrib.opentelemetry import (  # noqa: E402
    OpenTelemetryInterceptor,
    ReplaySafeTracerProvider,
    create_tracer_provider,
)

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
    assert root.kind == otel_trace.SpanKind.INTERNAL
    assert (root.attributes or {})["gen_ai.provider.name"] == "scripted"
    for chat in chats:
        attrs = chat.attributes or {}
        assert chat.kind == otel_trace.SpanKind.CLIENT  # a call to a model server
        assert attrs["gen_ai.operation.name"] == "chat" and attrs["gen_ai.provider.name"] == "scripted"
        assert "server.address" not in attrs  # the scripted model is no server
        assert int(attrs["gen_ai.usage.input_tokens"]) > 0 and int(attrs["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]
        assert float(attrs["agent_tools.cost_usd"]) > 0  # type: ignore[arg-type]
    (todo,) = children(turn, "execute_tool todoWrite")
    assert (todo.attributes or {})["gen_ai.tool.call.id"] == "call_0_0"
    assert todo.kind == otel_trace.SpanKind.INTERNAL and (todo.attributes or {})["gen_ai.tool.type"] == "extension"
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


ONE_QUESTION = {
    "question": "Which one?",
    "header": "Pick",
    "options": [{"label": "a", "description": "the first"}, {"label": "b", "description": "the second"}],
}


async def test_model_call_span_names_its_server_and_its_error(
    settings: Settings, worker_for: WorkerFor, spans: InMemorySpanExporter
) -> None:
    """Over HTTP the chat span carries server.address and server.port; a refused call carries error.type."""
    with fake_llm_server() as llm:
        llm.queue(
            openai_reply("", [("c1", "askUser", {"questions": [ONE_QUESTION]})]),
            Reply(status=400, body={"error": {"message": "no such model"}}),
        )
        settings.providers = {"local": ProviderEndpoint(kind="openai", base_url=llm.base_url, api_key="k")}
        settings.model = "local:gpt-x"
        settings.tracing = True
        async with worker_for() as client:
            handle = await client.start_session("go")
            await eventually(handle.pending_questions, timeout=60, what="the askUser question")
            await handle.answer_questions({"Which one?": "a"})
            result = await handle.result()
        port = int(llm.base_url.rsplit(":", 1)[1])
    assert result.status == SessionStatus.failed
    chats = [s for s in spans.get_finished_spans() if s.name == "chat gpt-x"]
    assert len(chats) == 2, [s.name for s in spans.get_finished_spans()]
    for chat in chats:
        attrs = chat.attributes or {}
        assert (attrs["server.address"], attrs["server.port"], attrs["gen_ai.provider.name"]) == (
            "127.0.0.1",
            port,
            "local",
        )
    ok, refused = sorted(chats, key=lambda s: s.start_time or 0)
    assert "error.type" not in (ok.attributes or {})
    assert (refused.attributes or {})["error.type"] == "ProviderRequestError"
    assert refused.status.status_code == otel_trace.StatusCode.ERROR
    ask = [s for s in spans.get_finished_spans() if s.name == "execute_tool askUser"]
    assert [(s.attributes or {})["gen_ai.tool.type"] for s in ask] == ["function"]  # answered on the client's side


async def test_host_interceptor_keeps_model_calls_under_its_activity_spans(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script, spans: InMemorySpanExporter
) -> None:
    """A host that configured temporalio's interceptor itself, with Temporal's own spans, keeps it alone:
    the chat span is the child of RunActivity:agent_tools.llm_step, not its sibling."""
    settings.model = script([{"turns": [{"say": "Hello."}]}])
    settings.tracing = True
    host = OpenTelemetryInterceptor(add_temporal_spans=True)
    plugin = AgentToolsPlugin(settings)
    client = await Client.connect(
        temporal_env.client.service_client.config.target_host,
        namespace=temporal_env.client.namespace,
        interceptors=[host],
        plugins=[plugin],
    )
    interceptors = list(client.config()["interceptors"])
    assert [tracing.is_tracing_interceptor(i) for i in interceptors].count(True) == 1 and host in interceptors
    async with build_worker(client, plugin):
        agent_client = AgentToolsClient(client, settings)
        try:
            result = await (await agent_client.start_session("hi")).result()
        finally:
            await agent_client.close()
    assert result.status == SessionStatus.completed
    finished = list(spans.get_finished_spans())
    by_id = {s.context.span_id: s for s in finished}
    (chat,) = [s for s in finished if s.name.startswith("chat ")]
    assert chat.parent is not None
    assert by_id[chat.parent.span_id].name == "RunActivity:agent_tools.llm_step"


def test_server_of_and_tool_type() -> None:
    assert tracing.server_of("https://api.openai.com/v1") == {"server.address": "api.openai.com", "server.port": 443}
    assert tracing.server_of("http://127.0.0.1:8000") == {"server.address": "127.0.0.1", "server.port": 8000}
    assert tracing.server_of("http://[::1]/v1") == {"server.address": "::1", "server.port": 80}
    assert tracing.server_of("http://h:99999") == {}  # a port out of range says nothing
    assert tracing.server_of(None) == tracing.server_of("") == tracing.server_of("/tmp/x") == {}
    assert [tracing.tool_type(c) for c in ("memory", "results", "history", "human", "web", None)] == [
        "datastore",
        "datastore",
        "datastore",
        "function",
        "extension",
        "extension",
    ]
