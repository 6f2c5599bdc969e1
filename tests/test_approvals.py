"""Tool approvals end to end on real Temporal: approve (runs once), deny (the reason reaches the model),
timeout, a changed argument needs a new approval, decisions refused (unknown, decided twice, another digest,
not an approver), the signal twin, the audit rows on both stores."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from agent_tools._agents import AgentDefinition
from agent_tools._catalog.spec import ToolLevel
from agent_tools._client import SessionHandle
from agent_tools._errors import SessionError
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._store.approval_tables import ApprovalStore
from agent_tools._store.db import Store
from agent_tools._user_tools import tool
from agent_tools.contracts._approvals import (
    ApprovalPolicy,
    ApprovalRejected,
    PendingApproval,
    argument_digest,
    requires_approval,
    resolve_approvals,
)
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually

RUNS: list[dict[str, Any]] = []


@tool(description="Send a payment", requires_approval=True)  # type: ignore[untyped-decorator]
async def send_payment(to: str, amount: int) -> str:
    RUNS.append({"to": to, "amount": amount})
    return f"sent {amount} to {to}"


@tool(description="Look up a balance")  # type: ignore[untyped-decorator]
async def balance(account: str) -> str:
    RUNS.append({"balance": account})
    return f"{account}: 100"


def pay(amount: int = 5, to: str = "bob") -> dict[str, Any]:
    return {"say": "paying", "tool_calls": [{"name": "send_payment", "arguments": {"to": to, "amount": amount}}]}


TOOLS = ["send_payment", "balance"]


@pytest.fixture(autouse=True)
def _clear_runs() -> None:
    RUNS.clear()


async def wait_for_approvals(handle: SessionHandle, count: int = 1, timeout: float = 20.0) -> list[PendingApproval]:
    return await eventually(
        handle.pending_approvals,
        until=lambda pending: len(pending) >= count,
        ignoring=(Exception,),  # the workflow may not have run its first task yet
        timeout=timeout,
        what=f"{count} pending approvals",
    )


async def current_details(handle: SessionHandle) -> str:
    meta = await handle.workflow.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return str(meta.current_details)


async def audit_rows(database_url: str, session_id: str) -> list[Any]:
    store = Store(database_url)
    try:
        return await ApprovalStore(store).for_session(session_id)
    finally:
        await store.close()


def test_an_agents_file_sets_the_policy(tmp_path: Path) -> None:
    from agent_tools._agents import AgentRegistry

    path = tmp_path / "agents.toml"
    path.write_text(
        '[[agents]]\nname = "ops"\n[agents.approval]\nrequire = ["mcp__github__*", "exec_python"]\n'
        'timeout_seconds = 3600\napprovers = ["ana", "bo"]\n'
    )
    policy = AgentRegistry.from_file(path).get("ops").approval
    assert policy == ApprovalPolicy(
        require=["mcp__github__*", "exec_python"], timeout_seconds=3600, approvers=["ana", "bo"]
    )


def test_policy_rules() -> None:
    from agent_tools._catalog.registry import builtin_specs

    specs = {s.name: s for s in builtin_specs()}
    flagged = send_payment.spec
    assert requires_approval(None, "send_payment", flagged)
    assert not requires_approval(None, "balance", balance.spec)
    assert requires_approval(ApprovalPolicy(require=["mcp__github__*"]), "mcp__github__create_issue", None)
    assert not requires_approval(ApprovalPolicy(require=["mcp__github__*"]), "mcp__slack__post", None)
    http = next(s for s in specs.values() if s.level == ToolLevel.l1_http)
    assert requires_approval(ApprovalPolicy(min_level=ToolLevel.l1_http), http.name, http)
    assert not requires_approval(ApprovalPolicy(min_level=ToolLevel.l3_sandbox), http.name, http)
    # A request can add to the agent's policy, never take from it; the agent's timeout and approvers win.
    resolved = resolve_approvals(
        ["balance", "send_payment", "todoWrite"],
        {"balance": balance.spec, "send_payment": flagged},
        ApprovalPolicy(require=["todo*"], timeout_seconds=60, approvers=["ana"]),
        ApprovalPolicy(require=["balance"], timeout_seconds=5, approvers=["mallory"]),
    )
    assert resolved is not None and resolved.tools == ["balance", "send_payment", "todoWrite"]
    assert resolved.timeout_seconds == 60 and resolved.approvers == ["ana"]
    assert resolve_approvals(["balance"], {"balance": balance.spec}, None, ApprovalPolicy()) is None
    # The digest is canonical: key order does not matter, any value changes it.
    assert argument_digest({"a": 1, "b": "x"}) == argument_digest({"b": "x", "a": 1})
    assert argument_digest({"a": 1}) != argument_digest({"a": 2})
    assert len(argument_digest({"s": "\ud800 lone"})) == 64


async def test_approved_call_runs_once_and_is_audited(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([pay(), {"say": "got: {{last_tool}}"}])
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS, keep_alive=True)
        [pending] = await wait_for_approvals(handle)
        assert pending.tool == "send_payment" and pending.digest == argument_digest({"to": "bob", "amount": 5})
        assert '"amount": 5' in pending.arguments_preview
        assert RUNS == []  # nothing runs before the decision
        assert (await handle.status()).status == SessionStatus.waiting_for_user
        details = await current_details(handle)
        assert "**Waiting for approval**" in details and pending.approval_id in details and pending.digest in details
        accepted = await handle.approve(pending.approval_id, digest=pending.digest, decided_by="ana")
        assert accepted.approved and accepted.remaining == 0
        kinds = [e.data.get("state") async for e in _progress_until_turn_finished(handle) if e.kind == "approval"]
        assert kinds == ["pending", "decided", "approved"]
        assert (await handle.latest_message()).content == "got: sent 5 to bob"
        assert RUNS == [{"to": "bob", "amount": 5}]
        # A replayed decision for the consumed approval is refused, and nothing runs again.
        with pytest.raises(SessionError, match="already decided"):
            await handle.approve(pending.approval_id, digest=pending.digest, decided_by="ana")
        state = await handle.approval_state()
        assert state.pending == [] and [d.outcome for d in state.decided] == ["approved"]
        assert state.decided[0].decided_by == "ana" and state.decided[0].via == "update"
        assert (await handle.status()).status == SessionStatus.idle
        await handle.stop("test over")
        assert RUNS == [{"to": "bob", "amount": 5}]
    [row] = await audit_rows(settings.database_url, handle.id)
    assert (row.approval_id, row.outcome, row.decided_by, row.tool) == (
        pending.approval_id,
        "approved",
        "ana",
        "send_payment",
    )
    assert row.digest == pending.digest and row.consumed_at is not None and row.result and "sent 5 to bob" in row.result


async def _turn_finished(handle: SessionHandle) -> None:
    async for _ in _progress_until_turn_finished(handle):
        pass


async def _progress_until_turn_finished(handle: SessionHandle) -> Any:
    async for event in handle.progress():
        yield event
        if event.kind == "turn_finished":
            return


async def test_denied_call_does_not_run_and_the_model_gets_the_reason(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([pay(), {"say": "got: {{last_tool}}"}])
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS)
        [pending] = await wait_for_approvals(handle)
        await handle.deny(pending.approval_id, reason="too expensive", decided_by="ana")
        result = await handle.result()
        assert result.final_message == (
            "got: The call of send_payment was denied by ana: too expensive. It did not run. Do not retry it unchanged."
        )
        assert RUNS == []
        entries = await handle.transcript()
        [tool_msg] = [e for e in entries if e.role == "tool"]
        assert "denied by ana: too expensive" in tool_msg.content
    [row] = await audit_rows(settings.database_url, handle.id)
    assert row.outcome == "denied" and row.reason == "too expensive" and row.consumed_at is None


async def test_no_decision_in_time_is_a_tool_error(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    settings.model = script([pay(), {"say": "got: {{last_tool}}"}])
    agent = AgentDefinition(name="assistant", approval=ApprovalPolicy(timeout_seconds=1))
    async with worker_for(tools=[send_payment, balance], agents=[agent]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS, keep_alive=True)
        [pending] = await wait_for_approvals(handle)
        assert pending.deadline is not None
        await asyncio.wait_for(_turn_finished(handle), timeout=30)
        assert (await handle.latest_message()).content == (
            "got: The call of send_payment needed a person's approval and none came within 1 seconds. It did not run."
        )
        # A decision after the timeout is too late: the approval is consumed.
        with pytest.raises(SessionError, match="already decided"):
            await handle.approve(pending.approval_id, digest=pending.digest)
        await handle.stop("test over")
        assert RUNS == []
    [row] = await audit_rows(settings.database_url, handle.id)
    assert row.outcome == "timed_out"


async def test_changed_arguments_need_a_new_approval(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    # A pattern in the request's options: the balance tool has no flag of its own.
    settings.model = script([pay(5), pay(500), {"say": "got: {{last_tool}}"}])
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob twice", tools=TOOLS)
        [first] = await wait_for_approvals(handle)
        await handle.approve(first.approval_id, digest=first.digest)
        second = await _next_pending(handle, first.approval_id)
        assert second.digest != first.digest and second.approval_id != first.approval_id
        # The first approval does not cover the second call's arguments.
        with pytest.raises(SessionError, match="digest does not match"):
            await handle.approve(second.approval_id, digest=first.digest)
        await handle.approve(second.approval_id, digest=second.digest)
        result = await handle.result()
        assert result.final_message == "got: sent 500 to bob"
        assert RUNS == [{"to": "bob", "amount": 5}, {"to": "bob", "amount": 500}]


async def _next_pending(handle: SessionHandle, after: str) -> PendingApproval:
    async def others() -> list[PendingApproval]:
        return [p for p in await handle.pending_approvals() if p.approval_id != after]

    return (await eventually(others, timeout=40, what="a second pending approval"))[0]


async def test_bad_decisions_are_refused_and_signalled_ones_recorded(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [{"say": "", "tool_calls": [{"name": "balance", "arguments": {"account": "acme"}}]}, {"say": "{{last_tool}}"}]
    )
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session(
            "check", tools=TOOLS, options={"approval": {"require": ["bal*"], "approvers": ["ana", "bo"]}}
        )
        [pending] = await wait_for_approvals(handle)
        assert pending.approvers == ["ana", "bo"]
        cases: list[tuple[dict[str, Any], str]] = [
            ({"approval_id": "apr_nope", "digest": pending.digest}, "unknown approval"),
            ({"approval_id": pending.approval_id, "digest": "0" * 64}, "digest does not match"),
            ({"approval_id": pending.approval_id, "digest": pending.digest, "decided_by": "mallory"}, "may not decide"),
            ({"approval_id": pending.approval_id, "digest": pending.digest}, "anonymous decider may not decide"),
        ]
        for fields, reason in cases:
            with pytest.raises(SessionError, match=reason):
                await handle.decide_approval(approve=True, decided_by=fields.pop("decided_by", None), **fields)
        # Approving needs the digest the decider saw.
        with pytest.raises(ApprovalRejected, match="needs the digest"):
            await handle.decide_approval(pending.approval_id, approve=True)
        # By signal nothing can be refused: each bad decision is recorded, the approval stays pending.
        await handle.workflow.signal("decide_approval_signal", {"approval_id": pending.approval_id, "approve": "yes"})
        await handle.decide_approval(
            pending.approval_id, approve=True, digest="f" * 64, decided_by="ana", by_signal=True
        )
        for _ in range(100):
            state = await handle.approval_state()
            if len(state.rejected) == 2:
                break
            await asyncio.sleep(0.05)
        assert "malformed decision" in state.rejected[0].reason
        assert "digest does not match" in state.rejected[1].reason
        assert [p.approval_id for p in state.pending] == [pending.approval_id] and RUNS == []
        # A good signalled decision approves.
        await handle.decide_approval(
            pending.approval_id, approve=True, digest=pending.digest, decided_by="bo", by_signal=True
        )
        result = await handle.result()
        assert result.final_message == "acme: 100"
        state = await handle.approval_state()
        assert state.decided[0].via == "signal" and state.decided[0].decided_by == "bo"


async def test_stop_while_waiting_clears_the_approval(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([pay(), {"say": "never"}])
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS)
        [pending] = await wait_for_approvals(handle)
        await handle.stop("test over")
        result = await handle.result()
        assert result.status == SessionStatus.stopped
        assert await handle.pending_approvals() == [] and RUNS == []
        state = await handle.approval_state()
        assert state.pending == [] and state.decided == [] and pending.approval_id


async def test_audit_rows_on_both_stores(
    settings: Settings, script: Script, worker_for: WorkerFor, store_url: str
) -> None:
    settings.database_url = store_url
    settings.model = script([pay(1), pay(2), {"say": "done"}])
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay twice", tools=TOOLS)
        [first] = await wait_for_approvals(handle)
        await handle.approve(first.approval_id, digest=first.digest, reason="fine", decided_by="ana")
        second = await _next_pending(handle, first.approval_id)
        await handle.deny(second.approval_id, reason="once is enough", decided_by="bo")
        assert (await handle.result()).final_message == "done"
    rows = await audit_rows(store_url, handle.id)
    assert [(r.outcome, r.decided_by, r.reason) for r in rows] == [
        ("approved", "ana", "fine"),
        ("denied", "bo", "once is enough"),
    ]
    assert rows[0].consumed_at is not None and rows[1].consumed_at is None
    assert RUNS == [{"to": "bob", "amount": 1}]


async def test_cli_lists_and_decides(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor
) -> None:
    from typer.testing import CliRunner

    from agent_tools._cli import app

    settings.model = script([pay(1), pay(2), {"say": "got: {{last_tool}}"}])
    env = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
    }
    runner = CliRunner()
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay twice", tools=TOOLS)
        [first] = await wait_for_approvals(handle)
        # The CLI runs its own event loop: call it from a thread while this loop keeps the worker going.
        out = await asyncio.to_thread(runner.invoke, app, ["approve", handle.id], env=env)
        assert out.exit_code == 0 and first.approval_id in out.output and first.digest in out.output, out.output
        # show names what the session waits for and the command that decides it.
        out = await asyncio.to_thread(runner.invoke, app, ["show", handle.id, "--no-transcript"], env=env)
        assert out.exit_code == 0 and "Waiting for an approval:" in out.output, out.output
        assert f"  {first.approval_id}  send_payment" in out.output and first.digest in out.output, out.output
        assert f"agent-tools approve {handle.id} {first.approval_id}" in out.output, out.output
        out = await asyncio.to_thread(runner.invoke, app, ["approve", handle.id, first.approval_id, "--deny"], env=env)
        assert out.exit_code == 2 and "--deny needs a --reason" in out.output
        out = await asyncio.to_thread(
            runner.invoke, app, ["approve", handle.id, first.approval_id, "--digest", "0" * 64], env=env
        )
        assert out.exit_code == 1 and "digest does not match" in out.output, out.output
        out = await asyncio.to_thread(
            runner.invoke, app, ["approve", handle.id, first.approval_id, "--by", "ana"], env=env
        )
        assert out.exit_code == 0 and '"approved": true' in out.output, out.output
        second = await _next_pending(handle, first.approval_id)
        args = ["approve", handle.id, second.approval_id, "--deny", "--reason", "enough", "--signal"]
        out = await asyncio.to_thread(runner.invoke, app, args, env=env)
        assert out.exit_code == 0 and "signalled" in out.output, out.output
        result = await handle.result()
        assert result.final_message == (
            "got: The call of send_payment was denied: enough. It did not run. Do not retry it unchanged."
        )
        out = await asyncio.to_thread(runner.invoke, app, ["approve", handle.id, first.approval_id], env=env)
        assert out.exit_code == 1 and "is not pending" in out.output
    assert RUNS == [{"to": "bob", "amount": 1}]


async def test_run_asks_for_the_approval_inline(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor, tmp_path: Path
) -> None:
    """``agent-tools run`` in a real terminal: a built-in tool the agent's policy names waits, the terminal
    asks, the denial typed there reaches the model."""
    from tests.support.terminal import Terminal, cli_env

    settings.model = script(
        [
            {"say": "", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "a", "status": "pending"}]}}]},
            {"say": "got: {{last_tool}}"},
        ]
    )  # fmt: skip
    agent = AgentDefinition(name="assistant", approval=ApprovalPolicy(require=["todo*"]))
    terminal = Terminal(tmp_path)
    try:
        async with worker_for(agents=[agent]):
            terminal.start(["run", "plan"], cli_env(temporal_env, settings))
            asked = await terminal.wait_for(lambda s: "Approve this call? [y/n]" in s, timeout=40)
            assert "Approval needed: todoWrite" in asked and "digest:" in asked
            terminal.keys("n", "Enter")
            await terminal.wait_for(lambda s: "Reason (for the model)" in s, timeout=20)
            terminal.keys("not now", "Enter")
            done = await terminal.wait_for(lambda s: "EXIT=" in s, timeout=40)
    finally:
        terminal.close()
    assert "EXIT=0" in done, done
    assert "denied by cli: not now" in done


async def test_decisions_are_carried_by_continue_as_new(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """The approvals' state is part of SessionState: after continue-as-new a decision for an approval the
    earlier run consumed is still refused, and a new call waits for its own approval in the new run."""
    settings.model = script([pay(1), {"say": "first done"}, pay(2), {"say": "second done"}])
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session(
            "pay", tools=TOOLS, keep_alive=True, options={"continue_as_new_after_turns": 1}
        )
        [first] = await wait_for_approvals(handle)
        first_run = (await handle.workflow.describe()).run_id
        await handle.approve(first.approval_id, digest=first.digest)
        for _ in range(200):
            if (await handle.workflow.describe()).run_id != first_run:
                break
            await asyncio.sleep(0.1)
        assert (await handle.workflow.describe()).run_id != first_run  # a new run
        with pytest.raises(SessionError, match="already decided"):
            await handle.approve(first.approval_id, digest=first.digest)
        await handle.send("again")
        second = await _next_pending(handle, first.approval_id)
        await handle.approve(second.approval_id, digest=second.digest)
        for _ in range(200):
            if (await handle.latest_message()).content == "second done":
                break
            await asyncio.sleep(0.1)
        assert (await handle.latest_message()).content == "second done"
        state = await handle.approval_state()
        assert [d.approval_id for d in state.decided] == [first.approval_id, second.approval_id]
        await handle.stop("test over")
    assert RUNS == [{"to": "bob", "amount": 1}, {"to": "bob", "amount": 2}]


async def _start_carrying(client: Any, settings: Settings, pending: PendingApproval) -> SessionHandle:
    """A run whose state carries ``pending`` as a continue-as-new taken while its call waited would: the
    same trigger again, and the approval of the call it is about to re-enter."""
    import uuid

    from agent_tools._session import WORKFLOW_NAME, SessionInput, SessionRequest, SessionState, Trigger

    state = SessionState(inbox=[Trigger(kind="user", content="pay bob")])
    state.approvals.pending.append(pending)
    session_id = f"session-{uuid.uuid4()}"
    await client.temporal.start_workflow(
        WORKFLOW_NAME,
        SessionInput(request=SessionRequest(tools=TOOLS), state=state),
        id=session_id,
        task_queue=settings.task_queue,
    )
    handle: SessionHandle = client.session(session_id)
    return handle


def _carried(decision: Any = None, deadline: str | None = None) -> PendingApproval:
    args = {"to": "bob", "amount": 5}
    return PendingApproval(
        approval_id="apr_carried",
        call_id="call_0_0",  # the scripted model's id for its first call
        tool="send_payment",
        arguments_preview="{}",
        digest=argument_digest(args),
        requested_at="2026-12-01T10:00:00+00:00",
        deadline=deadline,
        decision=decision,
    )


async def test_a_carried_wait_is_taken_over_by_the_re_entered_call(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """What continue-as-new while waiting needs from approvals: the re-entered call takes over the carried
    approval (no second one), a decision it got before the new run is consumed, one sent to the new run too."""
    from agent_tools.contracts._approvals import RecordedDecision

    settings.model = script([pay(), {"say": "got: {{last_tool}}"}])
    async with worker_for(tools=[send_payment, balance]) as client:
        # Decided while the old run was closing: consumed at once by the new run, the tool runs once.
        decided = RecordedDecision(approve=True, decided_by="ana", decided_at="2026-12-01T10:00:01+00:00")
        handle = await _start_carrying(client, settings, _carried(decision=decided))
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.final_message == "got: sent 5 to bob" and RUNS == [{"to": "bob", "amount": 5}]
        state = await handle.approval_state()
        assert [(d.approval_id, d.outcome, d.decided_by) for d in state.decided] == [("apr_carried", "approved", "ana")]
        [row] = await audit_rows(settings.database_url, handle.id)
        assert row.approval_id == "apr_carried" and row.consumed_at is not None
        # Still waiting: the new run shows the carried approval (not a second one) and takes the decision.
        RUNS.clear()
        handle = await _start_carrying(client, settings, _carried())
        [pending] = await wait_for_approvals(handle)
        await asyncio.sleep(0.3)
        assert [p.approval_id for p in await handle.pending_approvals()] == ["apr_carried"] and RUNS == []
        await handle.approve("apr_carried", digest=pending.digest)
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.final_message == "got: sent 5 to bob" and RUNS == [{"to": "bob", "amount": 5}]
        # A deadline that passed while the runs changed over: what is left of it is honoured (here nothing).
        RUNS.clear()
        handle = await _start_carrying(client, settings, _carried(deadline="2026-12-01T10:00:05+00:00"))
        result = await asyncio.wait_for(handle.result(), 30)
        assert "none came within 5 seconds" in (result.final_message or "") and RUNS == []


async def test_an_mcp_tool_matched_by_pattern_waits_while_the_others_run(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    from agent_tools.activities._mcp import mcp_user_tools
    from agent_tools.contracts._mcp import McpConfig
    from tests.support.mcp import fixture_server

    discovered = await mcp_user_tools(McpConfig(servers=[fixture_server()]))
    settings.model = script(
        [
            {
                "tool_calls": [
                    {"name": "mcp__fixture__add", "arguments": {"a": 19, "b": 23}},
                    {"name": "mcp__fixture__whoami", "arguments": {}},
                ]
            },
            {"say": "done"},
        ]
    )
    names = [t.spec.name for t in discovered]
    policy = ApprovalPolicy(require=["mcp__fixture__a*"], approvers=["ana"])
    agent = AgentDefinition(name="assistant", profile=None, tools=names, approval=policy)
    async with worker_for(tools=discovered, agents=[agent]) as client:
        handle = await client.start_session("use the MCP tools")
        [pending] = await wait_for_approvals(handle)
        assert pending.tool == "mcp__fixture__add" and pending.approvers == ["ana"]
        # whoami needs no approval: it has already run while add waits.
        assert await _tool_finished(handle, "mcp__fixture__whoami")
        assert not await _tool_finished(handle, "mcp__fixture__add", timeout=0.5)
        with pytest.raises(SessionError, match="may not decide"):
            await handle.approve(pending.approval_id, digest=pending.digest, decided_by="bo")
        await handle.approve(pending.approval_id, digest=pending.digest, decided_by="ana")
        assert (await handle.result()).status == SessionStatus.completed
        tool_msgs = {e.name: e.content for e in await handle.transcript() if e.role == "tool"}
    assert tool_msgs["mcp__fixture__add"] == "42"


async def _tool_finished(handle: SessionHandle, name: str, timeout: float = 10) -> bool:
    """Whether the progress stream (from its start) shows ``name`` finished within ``timeout`` seconds."""

    async def scan() -> bool:
        async for event in handle.progress():
            if event.kind == "tool_finished" and event.data.get("tool") == name:
                return True
        return False

    try:
        return await asyncio.wait_for(scan(), timeout=timeout)
    except TimeoutError:
        return False


# ---- continue-as-new while a call waits for its approval ----------------------------


def pay_then_echo(script: Script) -> str:
    """One call that needs approval, then the tool's result; every later message is echoed."""
    return str(
        script([{"repeat_last": True, "turns": [pay(), {"say": "got: {{last_tool}}"}, {"say": "echo {{last_user}}"}]}])
    )


async def _hand_over_while_waiting(handle: SessionHandle, temporal: Any, hand_overs: int) -> int:
    """Send messages (each adds history) until the session has continued-as-new ``hand_overs`` times while
    its call waits; returns how many were sent."""
    from tests.support.sessions import runs

    sent = 0
    while len(await runs(temporal, handle.id)) < hand_overs + 1:
        # Updates that arrive together share a workflow task: under load a message adds as few as three
        # events, so a run of 100 events may take about 33 of them.
        assert sent < 60 * hand_overs, "the run never continued-as-new while the approval waited"
        # Three at a time, so that updates are in flight while a run drains: each one is answered.
        burst = await asyncio.gather(*(handle.send(f"note {sent + i}") for i in range(3)))
        assert all(accepted.position >= 0 for accepted in burst)
        sent += 3
    return sent


async def test_an_approval_pending_across_hand_overs_runs_the_tool_once(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    settings.model = pay_then_echo(script)
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS, options={"continue_as_new_after_events": 100})
        [pending] = await wait_for_approvals(handle)
        sent = await _hand_over_while_waiting(handle, temporal_env.client, 2)
        # Two runs later: the same approval (not a second one) still waits, and the tool has not run.
        assert [p.approval_id for p in await handle.pending_approvals()] == [pending.approval_id]
        status = await handle.status()
        assert status.status == SessionStatus.waiting_for_user and status.turns == 1 and RUNS == []
        await handle.approve(pending.approval_id, digest=pending.digest)
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
        state = await handle.approval_state()
    assert result.status == SessionStatus.completed
    assert RUNS == [{"to": "bob", "amount": 5}]  # the tool ran once, in the last run
    tools = [e for e in entries if e.role == "tool"]
    assert [t.content for t in tools] == ["sent 5 to bob"], tools
    assert [e.content for e in entries if e.role == "assistant"][1] == "got: sent 5 to bob"
    users = [e.content for e in entries if e.role == "user"]
    assert users[0] == "pay bob" and sorted(users[1:]) == sorted(f"note {i}" for i in range(sent))
    assert [(d.approval_id, d.outcome) for d in state.decided] == [(pending.approval_id, "approved")]
    assert state.pending == []
    [row] = await audit_rows(settings.database_url, handle.id)
    assert row.approval_id == pending.approval_id and row.outcome == "approved" and row.consumed_at is not None


async def test_an_approval_denied_after_a_hand_over_is_one_tool_error(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    settings.model = pay_then_echo(script)
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS, options={"continue_as_new_after_events": 100})
        [pending] = await wait_for_approvals(handle)
        await _hand_over_while_waiting(handle, temporal_env.client, 1)
        await handle.decide_approval(
            pending.approval_id, approve=False, digest=pending.digest, decided_by="ana", reason="too risky",
            by_signal=True,
        )  # fmt: skip
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
    assert result.status == SessionStatus.completed and RUNS == []
    tools = [e for e in entries if e.role == "tool"]
    assert len(tools) == 1 and "denied by ana: too risky" in tools[0].content, tools
    [row] = await audit_rows(settings.database_url, handle.id)
    assert row.outcome == "denied" and row.reason == "too risky" and row.consumed_at is None


async def test_an_approval_timeout_keeps_its_deadline_across_a_hand_over(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """The deadline is the approval's own: a run that takes the wait over waits only for what is left of it
    (the hand-over comes seconds after the request, so a fresh timeout per run would end visibly later)."""
    from tests.support.sessions import runs

    settings.model = pay_then_echo(script)
    agent = AgentDefinition(name="assistant", approval=ApprovalPolicy(timeout_seconds=25))
    async with worker_for(tools=[send_payment, balance], agents=[agent]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS, options={"continue_as_new_after_events": 100})
        [pending] = await wait_for_approvals(handle)
        await asyncio.sleep(7)
        await _hand_over_while_waiting(handle, temporal_env.client, 1)
        handed_over = datetime.now(UTC)
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
        state = await handle.approval_state()
        chain = await runs(temporal_env.client, handle.id)
    assert result.status == SessionStatus.completed and RUNS == [] and len(chain) >= 2
    tools = [e for e in entries if e.role == "tool"]
    assert len(tools) == 1 and "none came within 25 seconds" in tools[0].content, tools
    [done] = state.decided
    assert done.outcome == "timed_out"
    requested = datetime.fromisoformat(pending.requested_at)
    waited = datetime.fromisoformat(done.decided_at) - requested
    # At the deadline set when it was asked, not 25 s after the hand-over (at least 7 s after the request).
    assert timedelta(seconds=25) <= waited < timedelta(seconds=30), (waited, handed_over - requested)
    assert handed_over - requested >= timedelta(seconds=7)


async def test_a_decision_in_the_hand_over_activation_completes_the_call_once(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """The race: with the worker down, messages past the history budget and the approval arrive together, so
    one activation both wakes the parked approval wait and makes a hand-over due. The wait stays parked, the
    decision is carried, and the next run runs the tool, once."""
    from agent_tools._client import AgentToolsClient
    from tests.support.sessions import runs

    settings.model = pay_then_echo(script)
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS, options={"continue_as_new_after_events": 100})
        [pending] = await wait_for_approvals(handle)
    notes = [f"note {i}" for i in range(90)]
    async with AgentToolsClient(temporal_env.client, settings) as idle:  # no worker runs meanwhile
        waiting = idle.session(handle.id)
        for note in notes:
            await waiting.send_signal(note)
        await waiting.decide_approval(
            pending.approval_id, approve=True, digest=pending.digest, decided_by="ana", by_signal=True
        )
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = client.session(handle.id)
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
        chain = await runs(temporal_env.client, handle.id)
        first = await temporal_env.client.get_workflow_handle(handle.id, run_id=chain[0]).fetch_history()
    assert result.status == SessionStatus.completed
    # The first run scheduled the model step only (no tool) and handed over; a later run ran the tool.
    scheduled = [e for e in first.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert len(scheduled) == 1 and first.events[-1].HasField("workflow_execution_continued_as_new_event_attributes")
    assert RUNS == [{"to": "bob", "amount": 5}]
    tools = [e for e in entries if e.role == "tool"]
    assert [t.content for t in tools] == ["sent 5 to bob"], tools
    assert [e.content for e in entries if e.role == "user"] == ["pay bob", *notes]
    [row] = await audit_rows(settings.database_url, handle.id)
    assert row.outcome == "approved" and row.consumed_at is not None


async def test_a_step_waiting_on_an_approval_and_a_question_hands_over_and_completes_both_once(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """Two parked calls of one step, of two kinds: the step is handed over, and each call gets one result."""
    question = {
        "question": "Which account?",
        "header": "Account",
        "options": [{"label": "a", "description": "main"}, {"label": "b", "description": "savings"}],
    }
    ask = {"name": "askUser", "arguments": {"questions": [question]}}
    both = {"say": "", "tool_calls": [pay()["tool_calls"][0], ask]}
    settings.model = script(
        [{"repeat_last": True, "turns": [both, {"say": "done: {{last_tool}}"}, {"say": "echo {{last_user}}"}]}]
    )
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session(
            "pay bob", tools=[*TOOLS, "askUser"], options={"continue_as_new_after_events": 100}
        )
        [pending] = await wait_for_approvals(handle)
        for _ in range(200):
            if await handle.pending_questions():
                break
            await asyncio.sleep(0.1)
        assert [q.question for q in await handle.pending_questions()] == ["Which account?"]
        await _hand_over_while_waiting(handle, temporal_env.client, 1)
        await handle.answer_questions({"Which account?": "b"})
        await asyncio.sleep(0.5)
        assert [p.approval_id for p in await handle.pending_approvals()] == [pending.approval_id] and RUNS == []
        await handle.approve(pending.approval_id, digest=pending.digest)
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
    assert result.status == SessionStatus.completed and RUNS == [{"to": "bob", "amount": 5}]
    tools = [e for e in entries if e.role == "tool"]
    assert [t.name for t in tools] == ["send_payment", "askUser"], tools
    assert tools[0].content == "sent 5 to bob" and '"b"' in tools[1].content, tools


async def test_stop_after_a_hand_over_cancels_the_resumed_approval_wait(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    settings.model = pay_then_echo(script)
    async with worker_for(tools=[send_payment, balance]) as client:
        handle = await client.start_session("pay bob", tools=TOOLS, options={"continue_as_new_after_events": 100})
        [pending] = await wait_for_approvals(handle)
        await _hand_over_while_waiting(handle, temporal_env.client, 1)
        await handle.stop("enough")
        result = await asyncio.wait_for(handle.result(), 60)
        state = await handle.approval_state()
        entries = await handle.transcript(limit=500)
        # The approval is gone with the stop: a decision for it now is refused, and nothing runs.
        with pytest.raises(SessionError):
            await handle.approve(pending.approval_id, digest=pending.digest)
    assert result.status == SessionStatus.stopped and RUNS == []
    assert state.pending == [] and state.decided == []
    assert [e for e in entries if e.role == "tool"] == []
