"""A worker against a bare ``temporal server start-dev``, the plugin's task-queue scoping, and clients that
never create the store."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agent_tools import _search_attributes as sa
from agent_tools._client import AgentToolsClient
from agent_tools._devserver import temporal_cli_path
from agent_tools._errors import ConfigurationError, StoreNotReady
from agent_tools._plugin import AgentToolsPlugin, compose_data_converter
from agent_tools._policy import ExecutionPolicy
from agent_tools._session import SessionOptions, SessionStatus
from agent_tools._settings import Settings
from agent_tools._web_client import WebToolError
from agent_tools._worker import build_worker
from agent_tools.testing import write_script
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.postgres import database_of_its_own


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_for_port(port: int, timeout: float = 30) -> None:
    async def listening() -> bool:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 0.5)
        writer.close()
        return True

    await eventually(
        listening, ignoring=(OSError, TimeoutError), timeout=timeout, interval=0.2, what=f"a listener on {port}"
    )


@pytest.mark.slow
async def test_agent_tools_worker_on_a_bare_dev_server(tmp_path: Path) -> None:
    """`temporal server start-dev` knows none of our search attributes: the worker registers them and a
    session runs."""
    port = _free_port()
    server = subprocess.Popen(
        [temporal_cli_path(), "server", "start-dev", "--headless", "--port", str(port), "--log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = None
    try:
        await _wait_for_port(port)
        address = f"127.0.0.1:{port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_TOOLS_", "OPENAI_", "ANTHROPIC_"))}
        env.update(
            AGENT_TOOLS_TEMPORAL_ADDRESS=address,
            AGENT_TOOLS_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
            AGENT_TOOLS_MODEL=write_script(tmp_path / "script.json", [{"say": "hi there"}]),
        )
        log = tmp_path / "worker.log"
        with log.open("w") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "agent_tools._cli", "worker"], cwd=tmp_path, env=env, stdout=out, stderr=out
            )
        deadline = time.monotonic() + 60
        while "registered search attributes" not in log.read_text():
            assert worker.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            await asyncio.sleep(0.2)
        assert "AgentName, SessionRootId, SessionParentId, SessionState, Depth" in log.read_text()
        settings = Settings(temporal_address=address, database_url=env["AGENT_TOOLS_DATABASE_URL"], agents_file=None)
        client = await AgentToolsClient.connect(settings)
        handle = await client.start_session("hello")
        result = await asyncio.wait_for(handle.result(), 60)
        assert (result.status, result.final_message) == (SessionStatus.completed, "hi there")
        listed = await client.list_sessions(agent="assistant")
        assert [s.session_id for s in listed] == [handle.id]
        await client.close()
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
async def test_a_client_starts_a_session_before_any_worker_on_a_bare_dev_server(tmp_path: Path) -> None:
    """A plain `temporal server start-dev`, a session started before any worker ran: the client registers
    the search attributes itself instead of failing with the server's error, and a worker started later
    runs the session."""
    port = _free_port()
    server = subprocess.Popen(
        [temporal_cli_path(), "server", "start-dev", "--headless", "--port", str(port), "--log-level", "error"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _wait_for_port(port)
        settings = Settings(
            temporal_address=f"127.0.0.1:{port}",
            database_url=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
            agents_file=None,
            model=write_script(tmp_path / "script.json", [{"say": "early bird"}]),
        )
        client = await AgentToolsClient.connect(settings)
        handle = await client.start_session("hello")
        plugin = AgentToolsPlugin(settings)
        temporal = await Client.connect(settings.temporal_address, plugins=[plugin])
        async with build_worker(temporal, plugin):
            result = await asyncio.wait_for(handle.result(), 60)
        assert (result.status, result.final_message) == (SessionStatus.completed, "early bird")
        await client.close()
    finally:
        server.terminate()
        server.wait(timeout=30)


async def test_missing_search_attributes_that_cannot_be_created_are_one_clear_line(
    temporal_env: WorkflowEnvironment,
) -> None:
    target = temporal_env.client.service_client.config.target_host
    client = await Client.connect(target, namespace="no-such-namespace")
    with pytest.raises(ConfigurationError) as caught:
        await sa.ensure_registered(client)
    message = str(caught.value)
    assert "\n" not in message
    assert "AgentName, SessionRootId, SessionParentId, SessionState, Depth" in message
    assert (
        "temporal operator search-attribute create --namespace no-such-namespace --name AgentName --type Keyword"
        in message
    )
    assert "--name Depth --type Int" in message


@activity.defn
async def _app_activity() -> str:
    return "the host app's"


async def test_plugin_registers_only_on_the_queues_it_serves(
    temporal_env: WorkflowEnvironment, settings: Settings
) -> None:
    plugin = AgentToolsPlugin(settings, register_activities=False)
    client = await Client.connect(temporal_env.client.service_client.config.target_host, plugins=[plugin])
    ours = Worker(client, task_queue=settings.task_queue).config(active_config=True)
    other = Worker(client, task_queue="another-queue", activities=[_app_activity]).config(active_config=True)
    assert {"AgentSession", "EventRouter", "DeepResearch"} == {
        w.__temporal_workflow_definition.name  # type: ignore[attr-defined]
        for w in ours.get("workflows", [])
    }
    assert not ours.get("activities")  # register_activities=False: a workflow-only worker
    assert not other.get("workflows") and other.get("activities") == [_app_activity]
    # The other worker keeps the SDK's default runner: the plugin touched nothing of it.
    assert "agent_tools" not in other["workflow_runner"].restrictions.passthrough_modules  # type: ignore[attr-defined]

    activity_only = AgentToolsPlugin(settings, register_workflows=False)
    client2 = await Client.connect(temporal_env.client.service_client.config.target_host, plugins=[activity_only])
    cfg = Worker(client2, task_queue=settings.task_queue).config(active_config=True)
    assert not cfg.get("workflows")
    names = {a.__temporal_activity_definition.name for a in cfg.get("activities", [])}  # type: ignore[attr-defined]
    assert {"agent_tools.llm_step", "agent_tools.prepare_session", "tool:webSearch"} <= names
    # Building the activity classes opens nothing: the store is created when a worker runs.
    assert not Path(settings.database_url.removeprefix("sqlite+aiosqlite:///")).exists()
    assert activity_only.holder._services is None


def test_runner_composition_keeps_the_hosts_choice() -> None:
    mine = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules("my_codec"))
    plugin = AgentToolsPlugin(Settings(agents_file=None))
    composed: Any = plugin.workflow_runner(mine)  # type: ignore[operator,misc]
    assert {"my_codec", "agent_tools", "pydantic"} <= set(composed.restrictions.passthrough_modules)
    unsandboxed = UnsandboxedWorkflowRunner()
    assert plugin.workflow_runner(unsandboxed) is unsandboxed  # type: ignore[operator,misc]


async def test_a_hosts_sandboxed_workflow_starts_a_session_with_our_models(
    settings: Settings, script: Any, worker_for: Any
) -> None:
    """The engine's workflows run unsandboxed; a host's own workflow in the SDK's sandbox imports our models
    and runs a session as its child. The plugin's passthrough shares the worker's modules with the sandbox,
    which would otherwise import the package afresh for every run of the host's workflow."""
    from agent_tools._session import SessionInput
    from tests.support.host_parent import HostParent

    settings.model = script([{"say": "hello from the child"}])
    async with worker_for(workflows=[HostParent]) as client:
        outcome, model_id = await client.temporal.execute_workflow(
            HostParent.run, "hi", id=f"host-{settings.task_queue}", task_queue=settings.task_queue
        )
    assert outcome == "completed: hello from the child"
    assert model_id == str(id(SessionInput))


def test_data_converter_composition_keeps_codec_and_failure_converter() -> None:
    from temporalio.contrib.pydantic import PydanticPayloadConverter
    from temporalio.converter import DefaultFailureConverterWithEncodedAttributes, PayloadCodec

    class Codec(PayloadCodec):
        async def encode(self, payloads: Any) -> Any:
            return list(payloads)

        async def decode(self, payloads: Any) -> Any:
            return list(payloads)

    codec = Codec()
    mine = DataConverter(payload_codec=codec, failure_converter_class=DefaultFailureConverterWithEncodedAttributes)
    composed = compose_data_converter(mine)
    assert composed.payload_codec is codec
    assert composed.failure_converter_class is DefaultFailureConverterWithEncodedAttributes
    assert composed.payload_converter_class is PydanticPayloadConverter
    assert compose_data_converter(None).payload_converter_class is PydanticPayloadConverter


async def test_client_over_an_existing_client_gets_pydantic_payloads(temporal_env: WorkflowEnvironment) -> None:
    from temporalio.contrib.pydantic import PydanticPayloadConverter

    plain = await Client.connect(temporal_env.client.service_client.config.target_host)
    agent_client = await AgentToolsClient.connect(Settings(agents_file=None), client=plain)
    assert agent_client.temporal.data_converter.payload_converter_class is PydanticPayloadConverter
    assert agent_client.temporal.service_client is plain.service_client  # the same connection


async def test_clients_never_create_the_store(tmp_path: Path, temporal_env: WorkflowEnvironment) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/absent.sqlite"
    client = AgentToolsClient(temporal_env.client, Settings(database_url=url, agents_file=None))
    with pytest.raises(StoreNotReady, match="agent-tools migrate"):
        await client.session("session-x").transcript()
    # The web tools run without the shared cache instead (here refused by the SSRF guard, no network).
    with pytest.raises(WebToolError, match="bad_request"):
        await client.tools.fetch({"url": "http://10.0.0.1/"})
    assert client.tools.cache_available is False
    assert not (tmp_path / "absent.sqlite").exists()
    await client.close()


def test_policy_flows_from_settings_plugin_and_agent() -> None:
    from agent_tools.activities._engine import session_policy

    base = ExecutionPolicy().merged({"tool_call": {"start_to_close_seconds": 42}})
    plugin = AgentToolsPlugin(Settings(agents_file=None), policy=base)
    assert plugin.settings.policy.tool_call.start_to_close_seconds == 42
    resolved = session_policy(plugin.settings.policy, {"model_step": {"maximum_attempts": 2}}, SessionOptions())
    assert resolved.tool_call.start_to_close_seconds == 42
    assert resolved.model_step.maximum_attempts == 2
    assert resolved.model_step.start_to_close_seconds == ExecutionPolicy().model_step.start_to_close_seconds
    legacy = session_policy(ExecutionPolicy(), {}, SessionOptions(heartbeat_timeout_seconds=5))
    assert legacy.tool_call.heartbeat_seconds == legacy.model_step.heartbeat_seconds == 5
    with pytest.raises(ValueError, match="start_to_close_seconds"):
        ExecutionPolicy().merged({"tool_call": {"start_to_close_seconds": -1}})


async def test_agent_policy_reaches_the_tool_call(worker_for: WorkerFor, script: Script, settings: Settings) -> None:
    from agent_tools import AgentDefinition, tool

    @tool
    async def slow() -> str:
        """Takes its time."""
        await asyncio.sleep(5)
        return "late"

    settings.model = script(
        [{"say": "", "tool_calls": [{"name": "slow", "arguments": {}}]}, {"say": "got: {{last_tool}}"}]
    )
    quick = AgentDefinition(
        name="assistant", policy={"tool_call": {"start_to_close_seconds": 1, "maximum_attempts": 1}}
    )
    async with worker_for(tools=[slow], agents=[quick]) as client:
        started = time.monotonic()
        result = await client.run("go", tools=["slow"])
    assert result.final_message is not None
    assert result.final_message.startswith("got: Tool slow failed")
    assert "timed out" in result.final_message.lower() or "timeout" in result.final_message.lower()
    assert time.monotonic() - started < 5


_WORKER_IMPORTS = """
import asyncio, sys
from temporalio.client import Client
from agent_tools._client import AgentToolsClient
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
from agent_tools._worker import build_worker

async def main() -> None:
    address, database, model, queue = sys.argv[1:5]
    settings = Settings(
        temporal_address=address, database_url=database, model=model, task_queue=queue, agents_file=None,
        openai_api_key=None, anthropic_api_key=None,
    )
    plugin = AgentToolsPlugin(settings)
    client = await Client.connect(address, plugins=[plugin])
    async with build_worker(client, plugin):
        agents = AgentToolsClient(client, settings)
        handle = await agents.start_session("note this", tools=["todoWrite", "saveMemory", "searchMemory"])
        result = await asyncio.wait_for(handle.result(), 60)
        tools = [e.content for e in await handle.transcript() if e.role == "tool"]
        assert len(tools) == 3 and "drinks tea" in tools[2], tools
        await agents.close()
    print(result.status.value, *sorted(m for m in sys.modules if m.split(".")[0] in ("sqlalchemy", "aiosqlite")))

asyncio.run(main())
"""


async def test_a_worker_on_a_sqlite_file_never_loads_the_async_engine(
    tmp_path: Path, temporal_env: WorkflowEnvironment
) -> None:
    """A worker's sessions (a model step, a tool, a memory save and search) run on the SQLite file's
    synchronous engine: ``sqlalchemy.ext.asyncio`` (and the ORM it imports), aiosqlite and the PostgreSQL
    dialect stay unloaded, since a SQLite worker never needs them. Checked in a fresh interpreter; this test
    process imports them."""
    model = write_script(
        tmp_path / "script.json",
        [  # type: ignore[arg-type]  # write_script's union of two list types defeats inference
            {
                "say": "",
                "tool_calls": [
                    {
                        "name": "todoWrite",
                        "arguments": {"todos": [{"content": "x", "status": "pending", "active_form": "xing"}]},
                    },
                    {"name": "saveMemory", "arguments": {"content": "The user drinks tea"}},
                ],
            },
            {"say": "", "tool_calls": [{"name": "searchMemory", "arguments": {"query": "tea"}}]},
            {"say": "done"},
        ],
    )
    script = tmp_path / "worker_imports.py"
    script.write_text(_WORKER_IMPORTS)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        temporal_env.client.service_client.config.target_host,
        f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        model,
        f"tq-imports-{os.getpid()}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    status, *loaded = out.decode().split()
    assert status == "completed", out
    assert "sqlalchemy" in loaded and "sqlalchemy.engine" in loaded, loaded  # the check sees what is loaded
    unwanted = ("sqlalchemy.ext.asyncio", "sqlalchemy.orm", "sqlalchemy.dialects.postgresql", "aiosqlite")
    heavy = [m for m in loaded if m.startswith(unwanted)]
    assert heavy == [], heavy


@pytest.mark.parametrize("store_url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
async def test_a_store_the_client_cannot_reach_is_named_not_raised_raw(
    temporal_env: WorkflowEnvironment, store_url: str
) -> None:
    from sqlalchemy import make_url, text
    from sqlalchemy.ext.asyncio import create_async_engine

    from agent_tools._store.db import Store

    # No such database, and nobody listening: named, the password never shown.
    base = make_url(store_url).set(database=f"agent_tools_gone_{uuid.uuid4().hex[:10]}")
    cases = {
        "nobody listens": base.set(port=1, password="s3cret-pw").render_as_string(hide_password=False),
        "no such database": base.render_as_string(hide_password=False),
    }
    for why, url in cases.items():
        client = AgentToolsClient(temporal_env.client, Settings(database_url=url, agents_file=None))
        with pytest.raises(StoreNotReady, match="cannot reach the store at postgresql") as refused:
            await client.session("session-x").transcript()
        assert "s3cret-pw" not in str(refused.value), why
        await client.close()

    # Opened, then gone: a later read says the same, not the driver's error with its statement. The database
    # is this test's own to drop (the store_url one serves every test of this process).
    async with database_of_its_own(store_url, "agent_tools_gone") as url:
        made = Store(url)
        await made.create_schema()
        await made.close()
        opened = AgentToolsClient(temporal_env.client, Settings(database_url=url, agents_file=None))
        assert await opened.session("session-x").transcript() == []
        admin = create_async_engine(store_url, isolation_level="AUTOCOMMIT")
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE "{make_url(url).database}" WITH (FORCE)'))
        await admin.dispose()
        with pytest.raises(StoreNotReady, match="cannot reach the store") as gone:
            await opened.session("session-x").transcript()
        assert "SELECT" not in str(gone.value)
        await opened.close()
