"""An approved call runs at most once: its worker is killed (SIGKILL) mid-call, a second worker retries the
activity, finds the grant consumed and does not run the tool again; a retry after a finished first attempt
returns the stored result."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from agent_tools._activity_io import SessionRef, ToolCallInput, ToolCallOutput
from agent_tools._client import AgentToolsClient
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._store.approval_tables import ApprovalStore
from agent_tools._store.db import Store
from agent_tools.activities._approvals import record_approval, run_approved
from agent_tools.contracts._approvals import RecordApprovalInput, argument_digest
from tests.support.fixture_types import Script

ROOT = Path(__file__).resolve().parents[1]


def _spawn(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "approval_worker.py")], env=env, cwd=ROOT)


async def test_sigkill_mid_approved_call_does_not_run_it_twice(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script, tmp_path: Path
) -> None:
    marker = tmp_path / "runs.txt"
    settings.model = script(
        [
            {"say": "", "tool_calls": [{"name": "slow_payment", "arguments": {"to": "bob", "amount": 7}}]},
            {"say": "got: {{last_tool}}"},
        ]
    )
    target = temporal_env.client.service_client.config.target_host
    env = {
        **os.environ,
        "AGENT_TOOLS_TEMPORAL_ADDRESS": target,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_MODEL": settings.model,
        "AGENT_TOOLS_AGENTS_FILE": "",
        "APPROVAL_MARKER": str(marker),
        "APPROVAL_TOOL_SECONDS": "30",
    }
    temporal = await Client.connect(target, data_converter=pydantic_data_converter)
    client = AgentToolsClient(temporal, settings)
    workers = [_spawn(env)]
    try:
        handle = await client.start_session("pay bob", tools=["slow_payment"], options={"heartbeat_timeout_seconds": 2})
        for _ in range(300):
            pending = await handle.pending_approvals() if (await handle.status()).steps else []
            if pending:
                break
            await asyncio.sleep(0.1)
        [approval] = pending
        await handle.approve(approval.approval_id, digest=approval.digest, decided_by="ana")
        for _ in range(300):
            if marker.exists() and marker.read_text():
                break
            await asyncio.sleep(0.1)
        assert marker.read_text() == "bob 7\n"  # the tool is running on the first worker
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait(timeout=10)
        workers.append(_spawn(env))
        result = await asyncio.wait_for(handle.result(), timeout=90)
        history = await handle.workflow.fetch_history()
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
        await client.close()
    assert result.status == SessionStatus.completed
    assert result.final_message is not None
    assert result.final_message.startswith("got: The approved call of slow_payment was interrupted"), result
    assert marker.read_text() == "bob 7\n"  # ran once, not again on the second worker
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert 2 in attempts, attempts  # the activity was retried...
    store = Store(settings.database_url)
    try:
        [row] = await ApprovalStore(store).for_session(handle.id)
    finally:
        await store.close()
    assert row.outcome == "approved" and row.consumed_at is not None and row.result is None  # ...and found it spent


async def test_a_retry_after_a_finished_attempt_returns_the_stored_result(store_url: str) -> None:
    store = Store(store_url)
    await store.create_schema()
    services: Any = SimpleNamespace(store=store)
    sid = f"s-{uuid.uuid4().hex}"  # the PostgreSQL database is shared by the test process
    arguments = {"to": "bob", "amount": 3}
    now = "2026-12-01T10:00:00+00:00"
    try:
        await record_approval(
            services,
            RecordApprovalInput(
                session_id=sid, approval_id="apr_1", call_id="c1", tool="pay", digest=argument_digest(arguments),
                arguments_preview="{}", outcome="approved", requested_at=now, decided_at=now,
            ),
        )  # fmt: skip
        # A retried record of the same decision changes nothing.
        await record_approval(
            services,
            RecordApprovalInput(
                session_id=sid, approval_id="apr_1", call_id="c1", tool="pay", digest=argument_digest(arguments),
                arguments_preview="{}", outcome="denied", requested_at=now, decided_at=now,
            ),
        )  # fmt: skip
        runs: list[int] = []

        async def run() -> ToolCallOutput:
            runs.append(1)
            return ToolCallOutput(content="paid")

        ref = SessionRef(
            session_id=sid, run_id="r1", agent="a", organisation="o", project="p", user="u", root_id=sid, model="m"
        )
        inp = ToolCallInput(session=ref, call_id="c1", name="pay", arguments=arguments, approval_id="apr_1")
        first, second = await run_approved(services, inp, run), await run_approved(services, inp, run)
        assert first.content == second.content == "paid" and runs == [1]
        # Other arguments under the same approval: refused, not run.
        other = inp.model_copy(update={"arguments": {"to": "eve", "amount": 3}})
        refused = await run_approved(services, other, run)
        assert refused.is_error and "differ from the approved" in refused.content and runs == [1]
        # An approval that is not in the store: refused, not run.
        missing = await run_approved(services, inp.model_copy(update={"approval_id": "apr_2"}), run)
        assert missing.is_error and "no recorded approval" in missing.content and runs == [1]
        [row] = await ApprovalStore(store).for_session(sid)
        assert row.outcome == "approved"
        # A tool that raises: its failure is the call's result, kept, and a retry does not run it again.
        await record_approval(
            services,
            RecordApprovalInput(
                session_id=sid, approval_id="apr_3", call_id="c3", tool="pay", digest=argument_digest(arguments),
                arguments_preview="{}", outcome="approved", requested_at=now, decided_at=now,
            ),
        )  # fmt: skip

        async def broken() -> ToolCallOutput:
            runs.append(3)
            raise RuntimeError("the bank is closed")

        third = inp.model_copy(update={"approval_id": "apr_3"})
        failed, again = await run_approved(services, third, broken), await run_approved(services, third, broken)
        assert failed.is_error and "failed: RuntimeError: the bank is closed" in failed.content
        assert again == failed and runs == [1, 3]
    finally:
        await store.close()
