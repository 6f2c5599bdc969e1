"""The worker's Prometheus endpoint: the SDK's temporal_* metrics and our agent_tools_* side by side, scraped
before and after sessions; a replayed session counts nothing again."""

from __future__ import annotations

import asyncio
import gzip
import os
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar, cast

import httpx
import pytest
from temporalio import workflow
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Replayer

from agent_tools import _metrics as metrics
from agent_tools import tool
from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._connection import connect
from agent_tools._errors import ConfigurationError, ProviderRequestError, ProviderRetryableError, ToolFailure
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._worker import build_worker, metrics_runtime
from agent_tools.activities._context import BuiltinContext
from agent_tools.activities._model_calls import complete
from agent_tools.activities._sandbox.tool import exec_python
from agent_tools.contracts._sandbox import ExecPythonArgs, ExecPythonResult, Isolation
from agent_tools.testing import write_script
from tests.support.fixture_types import Script
from tests.support.metrics import scrape, total
from tests.support.polling import eventually

QUESTION = "Which colour?"


@tool(description="A long report")  # type: ignore[untyped-decorator]
async def report(topic: str) -> str:
    return f"{topic}: " + "lorem ipsum " * 1000


@tool(description="Always fails")  # type: ignore[untyped-decorator]
async def broken(topic: str) -> str:
    raise ToolFailure(f"{topic} is out of order")


@tool(description="Send a payment", requires_approval=True)  # type: ignore[untyped-decorator]
async def pay(amount: int) -> str:
    return f"paid {amount}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


SCRIPT = [
    {"say": "working", "tool_calls": [_call("report", topic="q3"), _call("broken", topic="x"), _call("made_up")]},
    {
        "say": "one question",
        "tool_calls": [
            _call(
                "askUser",
                questions=[
                    {
                        "question": QUESTION,
                        "header": "Colour",
                        "options": [{"label": "red", "description": "warm"}, {"label": "blue", "description": "cool"}],
                    }
                ],
            )
        ],
    },
    {"say": "paying", "tool_calls": [_call("pay", amount=5)]},
    {"say": "done"},
]


async def _drive(client: AgentToolsClient) -> SessionHandle:
    handle = await client.start_session("go", tools=["report", "broken", "pay", "askUser"])
    await eventually(handle.pending_questions, timeout=60, what="the question")
    await handle.answer_questions({QUESTION: "red"})
    [pending] = await eventually(handle.pending_approvals, timeout=60, what="the approval")
    await handle.approve(pending.approval_id, digest=pending.digest)
    result = await handle.result()
    assert (result.status, result.final_message) == (SessionStatus.completed, "done")
    return handle


async def test_both_families_are_served_and_counts_move_once_per_event(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    settings = settings.model_copy(
        update={"model": script(SCRIPT), "temporal_address": temporal_env.client.service_client.config.target_host}
    )
    port = _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    plugin = AgentToolsPlugin(settings, tools=[report, broken, pay])
    runtime = metrics_runtime(f"127.0.0.1:{port}")
    client = await connect(settings, plugins=[plugin], runtime=runtime)
    async with build_worker(client, plugin):
        before = await scrape(url)
        handle = await _drive(AgentToolsClient(client, settings))
        after = await scrape(url)
    # The whole session replayed on the same runtime (what a worker does with a session it did not have
    # cached) records nothing more: workflow counts are taken only when the workflow runs ahead.
    history = await handle.workflow.fetch_history()
    await Replayer(workflows=[], plugins=[plugin], runtime=runtime).replay_workflow(history)
    replayed = await scrape(url)
    for name in metrics.METRIC_NAMES:
        assert total(replayed, name) == total(after, name), name
    # The control: the same replay through the meter without its replay guard does count again.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(metrics, "_workflow_meter", lambda: workflow.metric_meter()._underlying)  # type: ignore[attr-defined]
        await Replayer(workflows=[], plugins=[plugin], runtime=runtime).replay_workflow(history)
    unguarded = await scrape(url)
    assert total(unguarded, metrics.SESSIONS_STARTED) == total(after, metrics.SESSIONS_STARTED) + 1

    def moved(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert any(name.startswith("temporal_") for name, _, _ in after)
    assert moved("temporal_workflow_completed") == 1
    assert moved(metrics.SESSIONS_STARTED, agent="assistant") == 1
    assert moved(metrics.SESSIONS_ENDED, agent="assistant", outcome="completed") == 1
    assert moved(metrics.MODEL_CALLS, model=settings.model or "") == 4
    assert moved(metrics.MODEL_TOKENS, direction="output") > 0
    assert moved(metrics.MODEL_COST + "_count") == 4
    for tool_name in ("report", "broken", "askUser", "pay", "unknown"):
        assert moved(metrics.TOOL_CALLS, tool=tool_name) == 1, tool_name
    assert moved(metrics.TOOL_ERRORS, tool="broken") == 1
    assert moved(metrics.TOOL_ERRORS, tool="unknown") == 1
    assert moved(metrics.TOOL_ERRORS, tool="report") == 0
    assert moved(metrics.QUESTION_WAITS) == 1
    assert moved(metrics.APPROVAL_WAITS, tool="pay") == 1
    assert moved(metrics.APPROVAL_DECISIONS, tool="pay", outcome="approved") == 1
    assert moved(metrics.SPILLS, tool="report") == 1
    # Ours carry the SDK's labels too: which task queue and workflow or activity they came from.
    [started] = [labels for name, labels, _ in after if name == metrics.SESSIONS_STARTED]
    assert started["task_queue"] == settings.task_queue and started["workflow_type"]


async def test_the_worker_serves_them_at_the_metrics_bind(temporal_env: WorkflowEnvironment, tmp_path: Path) -> None:
    port = _free_port()
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    address = temporal_env.client.service_client.config.target_host
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_TOOLS_", "TEMPORAL_"))}
    env.update(
        AGENT_TOOLS_TEMPORAL_ADDRESS=address,
        AGENT_TOOLS_TASK_QUEUE=queue,
        AGENT_TOOLS_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        AGENT_TOOLS_MODEL=write_script(tmp_path / "script.json", [{"say": "hi"}]),
        AGENT_TOOLS_METRICS_BIND=f"127.0.0.1:{port}",
    )
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "agent_tools._cli", "worker"], env=env, cwd=tmp_path, stdout=out, stderr=out
        )
    url = f"http://127.0.0.1:{port}/metrics"
    try:

        async def page() -> list[tuple[str, dict[str, str], float]]:
            assert worker.poll() is None, log.read_text()[-3000:]
            return await scrape(url)

        await eventually(page, timeout=60, ignoring=(httpx.TransportError,), what="/metrics")
        client = await AgentToolsClient.connect(
            Settings(temporal_address=address, task_queue=queue, database_url=env["AGENT_TOOLS_DATABASE_URL"])
        )
        result = await (await client.start_session("hello")).result()
        assert result.final_message == "hi"
        await client.close()
        after = await eventually(
            page, until=lambda s: total(s, metrics.SESSIONS_ENDED, outcome="completed") == 1, timeout=30,
            what="the session's end counted",
        )  # fmt: skip
        assert total(after, metrics.SESSIONS_STARTED) == 1 and total(after, metrics.MODEL_CALLS) == 1
        assert total(after, "temporal_workflow_completed", task_queue=queue) == 1
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert worker.returncode == 0, log.read_text()[-3000:]


def test_a_bad_or_taken_metrics_address_is_one_line() -> None:
    with pytest.raises(ConfigurationError, match="the metrics address 'nowhere' is not HOST:PORT"):
        metrics_runtime("nowhere")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError) as caught:
            metrics_runtime(f"127.0.0.1:{port}")
    assert str(caught.value).startswith(f"cannot serve metrics on 127.0.0.1:{port}: ")
    assert "\n" not in str(caught.value)


class _Meter:
    """Records what the workflow side would add, in place of workflow.metric_meter()."""

    def __init__(self) -> None:
        self.added: list[tuple[str, dict[str, Any], int]] = []

    def create_counter(self, name: str, description: str | None = None, unit: str | None = None) -> _Meter._Counter:
        return _Meter._Counter(self, name)

    class _Counter:
        def __init__(self, meter: _Meter, name: str) -> None:
            self.meter, self.name = meter, name

        def add(self, value: int, attributes: Mapping[str, Any] | None = None) -> None:
            self.meter.added.append((self.name, dict(attributes or {}), value))


def test_progress_events_map_to_bounded_series(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = _Meter()
    monkeypatch.setattr(metrics, "_workflow_meter", lambda: meter)
    tools = ["pay"]
    events: list[tuple[str, dict[str, Any]]] = [
        ("tool_finished", {"tool": "x" * 10_000, "is_error": True}),
        ("tool_finished", {"tool": ["not", "a", "name"]}),
        ("approval", {"state": "pending", "tool": "pay"}),
        ("approval", {"state": "decided", "tool": "pay"}),
        ("approval", {"state": "timed_out", "tool": "pay"}),
        ("status", {"status": "running"}),
        ("status", {"status": "failed"}),
        ("question", {"questions": [{}, {}]}),
        ("turn_started", {}),
    ]
    for kind, data in events:
        metrics.on_progress(kind, data, agent="a", tools=tools)
    assert meter.added == [
        (metrics.TOOL_CALLS, {"tool": "unknown"}, 1),
        (metrics.TOOL_ERRORS, {"tool": "unknown"}, 1),
        (metrics.TOOL_CALLS, {"tool": "unknown"}, 1),
        (metrics.APPROVAL_WAITS, {"tool": "pay"}, 1),
        (metrics.APPROVAL_DECISIONS, {"tool": "pay", "outcome": "timed_out"}, 1),
        (metrics.SESSIONS_ENDED, {"agent": "a", "outcome": "failed"}, 1),
        (metrics.QUESTION_WAITS, {"agent": "a"}, 2),
    ]


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that keeps what is posted to it."""

    posts: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        type(self).posts.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def test_with_tracing_on_metrics_go_to_the_traces_collector(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """No metrics address, tracing on: the worker exports its metrics over OTLP to the collector the
    OpenTelemetry variables name, ours and the SDK's."""
    _Collector.posts = []
    collector = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    queue = f"otlp-{uuid.uuid4().hex[:8]}"
    address = temporal_env.client.service_client.config.target_host
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_TOOLS_", "TEMPORAL_", "OTEL_"))}
    env.update(
        AGENT_TOOLS_TEMPORAL_ADDRESS=address,
        AGENT_TOOLS_TASK_QUEUE=queue,
        AGENT_TOOLS_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        AGENT_TOOLS_MODEL=write_script(tmp_path / "script.json", [{"say": "hi"}]),
        AGENT_TOOLS_TRACING="true",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{collector.server_address[1]}",
        OTEL_EXPORTER_OTLP_HEADERS="x-team=agents",
    )
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "agent_tools._cli", "worker"], env=env, cwd=tmp_path, stdout=out, stderr=out
        )
    try:
        await eventually(
            lambda: asyncio.to_thread(log.read_text), until=lambda t: "worker on task queue" in t, timeout=60,
            what="the worker",
        )  # fmt: skip
        settings = Settings(temporal_address=address, task_queue=queue, database_url=env["AGENT_TOOLS_DATABASE_URL"])
        client = await AgentToolsClient.connect(settings)
        assert (await (await client.start_session("hello")).result()).final_message == "hi"
        await client.close()

        async def exported() -> bool:
            assert worker.poll() is None, log.read_text()[-3000:]
            bodies = b"".join(body for path, _, body in _Collector.posts if path == "/v1/metrics")
            return metrics.SESSIONS_ENDED.encode() in bodies and b"temporal_workflow_completed" in bodies

        await eventually(exported, timeout=30, what="ours and the SDK's metrics at the collector")
        assert all(headers.get("x-team") == "agents" for path, headers, _ in _Collector.posts if path == "/v1/metrics")
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
        collector.shutdown()
        collector.server_close()
    assert worker.returncode == 0, log.read_text()[-3000:]


class _ActivityMeter(_Meter):
    def with_additional_attributes(self, attributes: Mapping[str, Any]) -> _ActivityMeter:
        return self


async def test_a_sandbox_run_is_counted_by_isolation_and_outcome() -> None:
    isolation = Isolation(
        mode="bubblewrap", network="none", filesystem="minimal_root", pid_namespace=True, proc="own",
        private_tmp=True, user="agentci",
    )  # fmt: skip
    result = ExecPythonResult(ok=False, exit_code=1, stdout="", stderr="boom", duration_ms=3, isolation=isolation)

    async def run(args: ExecPythonArgs) -> ExecPythonResult:
        return result

    services: Any = SimpleNamespace(sandbox=SimpleNamespace(run=run))
    ctx = BuiltinContext(services=services, session=cast(Any, None), call_id="c1", tool="exec_python")
    meter = _ActivityMeter()
    env = ActivityEnvironment()
    env.metric_meter = cast(Any, meter)
    out = await env.run(exec_python, ExecPythonArgs(code="raise SystemExit(1)"), ctx)
    assert out.is_error
    assert meter.added == [(metrics.SANDBOX_RUNS, {"mode": "bubblewrap", "outcome": "error"}, 1)]


@pytest.mark.parametrize(
    ("failure", "kind"),
    [(ProviderRetryableError("429 slow down"), "retryable"), (ProviderRequestError("400 bad request"), "refused")],
)
async def test_a_failed_model_call_is_counted_by_kind(failure: Exception, kind: str) -> None:
    class Failing:
        async def complete(self, request: Any, on_text: Any) -> Any:
            raise failure

    services: Any = SimpleNamespace(providers=SimpleNamespace(resolve=lambda spec: (Failing(), "m1")))
    meter = _ActivityMeter()
    env = ActivityEnvironment()
    env.metric_meter = cast(Any, meter)
    with pytest.raises((ApplicationError, ProviderRequestError)):
        await env.run(complete, services, "acme:m1", [])
    assert meter.added == [(metrics.MODEL_CALL_FAILURES, {"model": "acme:m1", "kind": kind}, 1)]
