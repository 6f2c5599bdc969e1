"""Hostile decisions for a pending tool approval, by update and by signal, through the raw Temporal client:
an update is refused with a reason, a signal is recorded small and bounded, nothing makes a workflow task
fail, the approval stays pending, and a decision carrying NUL bytes and lone surrogates is stored cleaned."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowUpdateFailedError
from temporalio.common import RawValue

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._store.approval_tables import ApprovalStore
from agent_tools._store.db import Store
from agent_tools._user_tools import tool
from agent_tools.contracts._approvals import MAX_REJECTED_DECISIONS_KEPT, ApprovalState, PendingApproval
from tests.support.fixture_types import Script, WorkerFor
from tests.support.hostile import signal_settled, task_failures
from tests.support.polling import eventually

MEGABYTE = "x" * 1_000_000
HUGE = 10**40
RUNS: list[str] = []


@tool(description="Delete a file", requires_approval=True)  # type: ignore[untyped-decorator]
async def delete_file(path: str) -> str:
    RUNS.append(path)
    return f"deleted {path}"


def _raw(data: bytes) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


def _json(value: Any) -> RawValue:
    """As a raw client sends it: JSON with ASCII escapes, which can carry a lone surrogate (our client's
    pydantic converter cannot even encode one)."""
    return _raw(json.dumps(value).encode())


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"x": value}
    return value


def _cases(p: PendingApproval) -> list[tuple[str, dict[str, Any]]]:
    ok = {"approval_id": p.approval_id, "digest": p.digest, "approve": True}
    return [
        ("deep approval_id", {**ok, "approval_id": _deep(200)}),
        ("deep reason", {**ok, "reason": _deep(40)}),
        ("huge approval_id", {**ok, "approval_id": MEGABYTE}),
        ("huge reason", {**ok, "reason": MEGABYTE}),
        ("huge digest", {**ok, "digest": MEGABYTE}),
        ("huge decided_by", {**ok, "decided_by": MEGABYTE}),
        ("NUL in the id", {**ok, "approval_id": p.approval_id + "\x00"}),
        ("lone surrogate in the id", {**ok, "approval_id": "\ud800" + p.approval_id}),
        ("NUL in the digest", {**ok, "digest": p.digest[:-1] + "\x00"}),
        ("approve is a string", {**ok, "approve": "yes"}),
        ("approve is a number", {**ok, "approve": 1}),
        ("approve is a huge number", {**ok, "approve": HUGE}),
        ("approve missing", {"approval_id": p.approval_id, "digest": p.digest}),
        ("id is a number", {**ok, "approval_id": HUGE}),
        ("id is null", {**ok, "approval_id": None}),
        ("digest is a list", {**ok, "digest": [p.digest]}),
        ("decided_by is an object", {**ok, "decided_by": {"name": "ana"}}),
        ("empty id", {**ok, "approval_id": ""}),
    ]


# Generous: under the full suite two dev servers and their workers share the machine's two cores, and 10 s
# (the first bound) was once too short on the way to the first pending approval.
_PATIENCE = 1200  # x 0.05 s


async def _signal_settled(handle: SessionHandle, payload: RawValue) -> None:
    """Signal a decision, settled by an update whose validator refuses an unknown id."""
    unknown = {"approval_id": "settle", "digest": "0" * 64, "approve": True, "decided_by": "ana"}
    await signal_settled(handle, "decide_approval_signal", payload, ("decide_approval", _json(unknown)))


async def _pending(handle: SessionHandle) -> PendingApproval:
    found = await eventually(
        handle.pending_approvals,
        ignoring=(Exception,),
        timeout=_PATIENCE * 0.1,
        interval=0.05,
        what="a pending approval",
    )
    return found[0]


async def _rejected(handle: SessionHandle, count: int) -> ApprovalState:
    async def state() -> ApprovalState:
        result: ApprovalState = await handle.query("approval_state", ApprovalState)
        return result

    return await eventually(
        state,
        until=lambda s: len(s.rejected) >= count,
        timeout=_PATIENCE * 0.1,
        interval=0.05,
        what=f"{count} rejected decisions recorded",
    )


async def test_hostile_decisions_are_refused_or_recorded_and_the_approval_stays_pending(
    worker_for: WorkerFor, script: Script, settings: Settings, store_url: str
) -> None:
    settings.database_url = store_url
    RUNS.clear()
    call = {"name": "delete_file", "arguments": {"path": "/tmp/x\ud800"}}
    settings.model = script([{"tool_calls": [call]}, {"say": "{{last_tool}}"}])
    async with worker_for(tools=[delete_file]) as client:
        assert isinstance(client, AgentToolsClient)
        handle = await client.start_session("delete it", tools=["delete_file"])
        pending = await _pending(handle)
        assert "\ud800" not in pending.arguments_preview  # cleaned: the store keeps this text
        cases = _cases(pending)
        # By update: every one refused, nothing recorded.
        for label, bad in cases:
            with pytest.raises(WorkflowUpdateFailedError):
                await handle.workflow.execute_update("decide_approval", _json(bad), result_type=dict)
            assert [p.approval_id for p in await handle.pending_approvals()] == [pending.approval_id], label
        # By signal: recorded as rejected, whatever the payload, raw bytes included. One at a time: sent back to
        # back, several 1 MB signals buffered while a workflow task runs pass the server's buffered-events limit,
        # and the server then fails that task (FORCE_CLOSE_COMMAND) to flush them, which is the server's doing,
        # not the session's (seen once in CI). A refused update after each one settles it first.
        for _, bad in cases:
            await _signal_settled(handle, _json(bad))
        for payload in (b'"garbage"', b"[1, 2]", json.dumps(_deep(300)).encode(), b"not json", b"\xff\xfe"):
            await _signal_settled(handle, _raw(payload))
        state = await _rejected(handle, MAX_REJECTED_DECISIONS_KEPT)
        # Bounded: the last ones only, each a reason, a short preview and the payload's size.
        assert len(state.rejected) == MAX_REJECTED_DECISIONS_KEPT
        assert all(len(r.preview or "") <= 200 and len(r.reason) <= 4_000 for r in state.rejected)
        assert state.rejected[-1].reason.startswith("unreadable decision") or "not JSON" in state.rejected[-1].reason
        assert state.decided == [] and [p.approval_id for p in state.pending] == [pending.approval_id]
        assert (await handle.status()).status == SessionStatus.waiting_for_user and RUNS == []
        # A lone surrogate cannot even be decoded (the SDK's pydantic converter refuses the JSON): an update is
        # refused, a signal recorded as rejected.
        surrogates = {
            "approval_id": pending.approval_id,
            "digest": pending.digest,
            "approve": False,
            "reason": "no way\ud800",
        }
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.workflow.execute_update("decide_approval", _json(surrogates), result_type=dict)
        await handle.workflow.signal("decide_approval_signal", _json(surrogates))
        state = await _rejected(handle, MAX_REJECTED_DECISIONS_KEPT)
        for _ in range(_PATIENCE):
            state = await handle.query("approval_state", ApprovalState)
            if state.rejected[-1].size == len(json.dumps(surrogates)):
                break
            await asyncio.sleep(0.05)
        assert "not JSON the session can read" in state.rejected[-1].reason and state.decided == []
        # A denial whose reason and decider carry NUL bytes: taken, cleaned in the state, for the model and in the
        # store (PostgreSQL text cannot hold a NUL).
        denial = {
            "approval_id": pending.approval_id,
            "digest": pending.digest,
            "approve": False,
            "reason": "no\x00 way",
            "decided_by": "ana\x00",
        }
        await handle.workflow.execute_update("decide_approval", _json(denial), result_type=dict)
        result = await asyncio.wait_for(handle.result(), 30)
        assert result.status == SessionStatus.completed and RUNS == []
        assert "denied by ana\ufffd: no\ufffd way" in (result.final_message or "")
        assert await task_failures(client.temporal, handle.id) == []
    store = Store(settings.database_url)
    try:
        [row] = await ApprovalStore(store).for_session(handle.id)
    finally:
        await store.close()
    assert row.outcome == "denied" and row.reason == "no\ufffd way" and row.decided_by == "ana\ufffd"


@pytest.mark.parametrize(
    ("label", "approval", "refusal"),
    [
        ("huge pattern", {"require": [MEGABYTE]}, "must be at most 200 characters"),
        ("too many patterns", {"require": [f"t{i}" for i in range(101)]}, "at most 100 items"),
        ("huge approver", {"approvers": [MEGABYTE]}, "must be at most 200 characters"),
        ("huge timeout", {"timeout_seconds": HUGE}, "timeout_seconds"),
        ("negative timeout", {"timeout_seconds": -1}, "timeout_seconds"),
        ("deep pattern", {"require": [_deep(40)]}, ""),
        ("pattern a number", {"require": [HUGE]}, ""),
        ("unknown level", {"min_level": "l9_root"}, ""),
    ],
)
async def test_an_approval_policy_that_does_not_fit_refuses_the_start(
    label: str, approval: dict[str, Any], refusal: str, worker_for: WorkerFor, script: Script, settings: Settings
) -> None:
    """Our client refuses it before anything starts; a raw client's start fails once, with the reason, and no
    workflow task fails."""
    from temporalio.client import WorkflowFailureError

    from agent_tools._errors import SessionError
    from agent_tools._session import WORKFLOW_NAME

    settings.model = script([{"say": "hi"}])
    async with worker_for(tools=[delete_file]) as client:
        with pytest.raises((SessionError, ValueError)) as refused:
            await client.start_session("hi", options={"approval": approval})
        assert refusal in str(refused.value)
        body = {"request": {"prompt": "hi", "options": {"approval": approval}}}
        handle = await client.temporal.start_workflow(
            WORKFLOW_NAME, _json(body), id=f"raw-approval-{label.replace(' ', '-')}", task_queue=settings.task_queue
        )
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        assert "refused to start" in str(failed.value.cause) or "cannot be read" in str(failed.value.cause)
        assert await task_failures(client.temporal, handle.id) == []
