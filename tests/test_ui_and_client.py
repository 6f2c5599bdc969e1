"""What the Temporal UI and clients see: search attributes, current details, summaries, messages in,
stop, live progress, the CLI."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner, Result

from agent_tools import _search_attributes as sa
from agent_tools._cli import app
from agent_tools._client import SessionHandle
from agent_tools._errors import SessionError
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually


async def test_chat_session_messages_status_details_and_stop(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"say": "", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "reply", "status": "in_progress"}]}}]},
            {"say": "hello {{last_user}}"},
            {"say": "again {{last_user}}"},
        ]
    )  # fmt: skip
    async with worker_for() as client:
        handle = await client.start_session("first", keep_alive=True, title="Chat", tools=["todoWrite"])
        await eventually(
            lambda: _status_is(handle, SessionStatus.idle), timeout=40, interval=0.05, what="the session idle"
        )
        accepted = await handle.send("second")
        assert accepted.queued_behind >= 0
        await eventually(
            lambda: _latest_is(handle, "again second"), timeout=40, interval=0.05, what='latest message "again second"'
        )

        desc = await handle.workflow.describe()
        attrs = desc.typed_search_attributes
        assert attrs.get(sa.AGENT_NAME) == "assistant"
        assert attrs.get(sa.SESSION_ROOT_ID) == handle.id
        assert attrs.get(sa.DEPTH) == 0
        meta = await handle.workflow.query("__temporal_workflow_metadata")
        details = meta.current_details
        assert "**Chat**" in details and "[~] reply" in details

        listed = await client.list_sessions(agent="assistant")
        assert [s.title for s in listed if s.session_id == handle.id] == ["Chat"]  # the list names it

        await handle.stop("done here")
        result = await handle.result()
        assert result.status == SessionStatus.stopped
        with pytest.raises(SessionError, match="refused"):
            await handle.send("too late")


async def _status_is(handle: SessionHandle, status: SessionStatus) -> bool:
    return bool((await handle.status()).status == status)


async def _latest_is(handle: SessionHandle, text: str) -> bool:
    return bool((await handle.latest_message()).content == text)


async def test_progress_stream_reports_turn_tools_and_answer(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "say": "",
                "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "pending"}]}}],
            },
            {"say": "ok"},
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("go", tools=["todoWrite"])
        await handle.result()
        kinds = []
        async for event in handle.progress():
            kinds.append(event.kind)
        for expected in (
            "turn_started",
            "tool_started",
            "todos",
            "tool_finished",
            "assistant_message",
            "turn_finished",
        ):
            assert expected in kinds, (expected, kinds)
        assert kinds.index("tool_started") < kinds.index("tool_finished") < kinds.index("assistant_message")


async def test_step_budget_keeps_tool_results_for_next_turn(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"say": "", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": []}}]},
            {"say": "", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": []}}]},
            {"say": "resumed"},
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("go", tools=["todoWrite"], max_steps=2, keep_alive=True)
        await eventually(
            lambda: _latest_is(handle, "(stopped after the step budget of 2 steps for one turn)"),
            timeout=40,
            interval=0.05,
            what="the step-budget stop message",
        )
        await handle.send("continue")
        await eventually(
            lambda: _latest_is(handle, "resumed"), timeout=40, interval=0.05, what='latest message "resumed"'
        )
        roles = [e.role for e in await handle.transcript()]
        # every tool call kept its result, sent before the next user message
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user", "assistant"]
        await handle.stop()


async def test_cli_lists_shows_and_sends(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor
) -> None:
    settings.model = script([{"say": "one"}, {"say": "two {{last_user}}"}])
    async with worker_for() as client:
        handle = await client.start_session("hi", keep_alive=True)
        await eventually(lambda: _latest_is(handle, "one"), timeout=40, interval=0.05, what='latest message "one"')
        env = {
            "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
            "AGENT_TOOLS_DATABASE_URL": settings.database_url,
            "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        }
        runner = CliRunner()
        # The CLI runs its own event loop: call it from a thread while this loop keeps the worker going.
        out = await asyncio.to_thread(runner.invoke, app, ["send", handle.id, "there"], env=env)
        assert out.exit_code == 0, out.output
        await eventually(
            lambda: _latest_is(handle, "two there"), timeout=40, interval=0.05, what='latest message "two there"'
        )
        out = await asyncio.to_thread(runner.invoke, app, ["show", handle.id], env=env)
        assert out.exit_code == 0, out.output
        assert "two there" in out.output and '"status": "idle"' in out.output
        out = await asyncio.to_thread(runner.invoke, app, ["sessions", "--agent", "assistant"], env=env)
        assert handle.id in out.output
        out = await asyncio.to_thread(runner.invoke, app, ["stop", handle.id], env=env)
        assert out.exit_code == 0
        assert (await handle.result()).status == SessionStatus.stopped
        out = await asyncio.to_thread(runner.invoke, app, ["send", handle.id, "late"], env=env)
        assert out.exit_code != 0 and "refused" in out.output


async def test_cli_and_client_name_a_missing_session_and_a_bad_state(
    settings: Settings, temporal_env: WorkflowEnvironment, worker_for: WorkerFor
) -> None:
    env = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
    }
    runner = CliRunner()
    # Reads used to end in a traceback (RPCError NOT_FOUND); a typo'd state used to list nothing.
    for args in (["show", "nope"], ["watch", "nope"], ["answer", "nope", "--yes"]):
        out = await asyncio.to_thread(runner.invoke, app, args, env=env)
        assert out.exit_code == 1, out.output
        assert "no session 'nope'" in out.output and "Traceback" not in out.output
    out = await asyncio.to_thread(runner.invoke, app, ["sessions", "--state", "waiting"], env=env)
    assert out.exit_code == 1
    assert "unknown session state 'waiting': use one of starting, running, waiting_for_user" in out.output
    async with worker_for() as client:
        missing = client.session("nope")
        for read in (missing.status, missing.result, missing.pending_questions):
            with pytest.raises(SessionError, match="no session 'nope'"):
                await read()
        with pytest.raises(SessionError, match="no session 'nope'"):
            await anext(aiter(missing.progress()))


async def test_malformed_signal_is_dropped_and_the_session_lives_on(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """A signal whose payload does not fit SendMessage cannot be answered; the SDK drops it with a warning
    and the session keeps working (no failed workflow task, nothing else lost)."""
    settings.model = script([{"say": "one"}, {"say": "two {{last_user}}"}])
    async with worker_for() as client:
        handle = await client.start_session("hi", keep_alive=True)
        for _ in range(200):
            if (await handle.latest_message()).content == "one":
                break
            await asyncio.sleep(0.05)
        await handle.workflow.signal("send_message", {"content": ""})
        await handle.workflow.signal("send_message", {"nonsense": 1})
        await handle.send("ok")
        for _ in range(200):
            if (await handle.latest_message()).content == "two ok":
                break
            await asyncio.sleep(0.05)
        assert (await handle.latest_message()).content == "two ok"
        desc = await handle.workflow.describe()
        assert desc.status is not None and desc.status.name == "RUNNING"
        await handle.stop()


def test_cli_without_a_server_says_how_to_get_one(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    env = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "AGENT_TOOLS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/s.db",
    }
    # `worker` and `web research` ended in a traceback here before they went through the shared runner.
    for args in (["run", "hello"], ["worker"], ["web", "research", "why"], ["sessions"]):
        out = CliRunner().invoke(app, args, env=env)
        assert out.exit_code == 1, (args, out.output)
        assert "cannot reach Temporal" in out.output and "agent-tools dev" in out.output, args


def test_embedded_server_on_a_taken_port_says_so(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"AGENT_TOOLS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/s.db"}
        out = CliRunner().invoke(app, ["demo", "--port", str(port), "--ui-port", "0"], env=env)
    assert out.exit_code == 1
    assert f"port {port} is already in use" in out.output


async def test_a_dev_server_that_fails_to_start_says_why_from_its_log(tmp_path: Path) -> None:
    """Its output goes to a file (the banner would repeat our own line): when it does not start, its last
    words come back in the error instead of staying in the file."""
    from agent_tools._devserver import start_dev_server
    from agent_tools._errors import ConfigurationError

    log = tmp_path / "logs" / "temporal.log"
    with pytest.raises(ConfigurationError) as caught:
        await start_dev_server(ui=False, db_filename=str(tmp_path / "missing" / "t.db"), output=log)
    message = str(caught.value)
    assert message.startswith("the Temporal dev server did not start: ") and "no such file or directory" in message
    assert str(log) in message


async def test_the_worker_not_the_client_knows_the_model_keys(
    settings: Settings, temporal_env: WorkflowEnvironment, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A terminal without OPENAI_API_KEY starts an ``openai:`` session that a worker with the key serves; on a
    worker without one (or without the provider) the session fails, and the terminal prints the one-line reason."""
    from tests.support.fake_llm import Reply, fake_llm_server, openai_reply

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    env = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_AGENTS_FILE": "",
        "AGENT_TOOLS_OPENAI_API_KEY": "",
        "OPENAI_API_KEY": "",
    }
    runner = CliRunner()

    async def run(model: str) -> Result:
        return await asyncio.to_thread(runner.invoke, app, ["run", "hi", "--model", model], env=env)

    with fake_llm_server() as llm:
        keyed = settings.model_copy(update={"openai_api_key": "sk-worker", "openai_base_url": llm.base_url})
        llm.queue(openai_reply("answered with the worker's key"))
        async with worker_for(settings=keyed):
            out = await run("openai:gpt-4.1-mini")
        assert out.exit_code == 0, out.output
        assert "answered with the worker's key" in out.output
        assert {k.lower(): v for k, v in llm.requests[-1]["headers"].items()}["authorization"] == "Bearer sk-worker"

        # What OpenAI answers a request without a key.
        llm.queue(Reply(status=401, body={"error": {"message": "You didn't provide an API key.", "type": "x"}}))
        async with worker_for(settings=settings.model_copy(update={"openai_base_url": llm.base_url})):
            out = await run("openai:gpt-4.1-mini")
            unknown = await run("nosuch:model-x")
        assert "authorization" not in {k.lower() for k in llm.requests[-1]["headers"]}
    assert out.exit_code == 1, out.output
    assert "error: model call failed: openai HTTP 401: You didn't provide an API key." in out.output
    assert unknown.exit_code == 1, unknown.output
    assert "Traceback" not in unknown.output
    reason = unknown.output.strip().splitlines()[-1]
    assert reason.startswith("session failed: unknown model provider 'nosuch': use openai, anthropic"), reason


async def test_the_handle_decides_approvals_by_signal_and_reads_the_state(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """The signal path and the state queries of approvals are on the session handle, the one client face."""
    from agent_tools import tool

    @tool(description="Look up a balance", requires_approval=True)  # type: ignore[untyped-decorator]
    async def guarded_balance(account: str) -> str:
        return f"{account}: 100"

    settings.model = script(
        [
            {"say": "", "tool_calls": [{"name": "guarded_balance", "arguments": {"account": "acme"}}]},
            {"say": "{{last_tool}}"},
        ]
    )
    async with worker_for(tools=[guarded_balance]) as client:
        handle = await client.start_session("check", tools=["guarded_balance"])
        await eventually(lambda: _has_pending_approval(handle), timeout=30, what="a pending approval")
        [pending] = (await handle.approval_state()).pending
        assert await handle.decide_approval(
            pending.approval_id, approve=True, digest=pending.digest, decided_by="ana", by_signal=True
        ) is None  # fmt: skip
        result = await handle.result()
        assert result.final_message == "acme: 100"
        decided = (await handle.approval_state()).decided
        assert [(d.via, d.decided_by) for d in decided] == [("signal", "ana")]
        assert (await handle.human_state()).pending == []


async def _has_pending_approval(handle: SessionHandle) -> bool:
    return bool(await handle.pending_approvals())
