"""Tool approvals on the worker: the audit record of each decision, and the grant a tool activity claims.

An approved call runs at most once: the tool activity claims the grant (one ``UPDATE ... WHERE
consumed_at IS NULL``) before it runs the tool, and stores the result beside it. An attempt that finds the
grant consumed (a retry after its worker died mid-call) returns that result when the first attempt
finished, else a tool error saying the call was interrupted; it never runs the tool a second time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_tools._activity_io import ToolCallInput, ToolCallOutput
from agent_tools._store.approval_tables import ApprovalStore
from agent_tools.activities._services import ActivityClass, Services
from agent_tools.contracts._approvals import (
    ACTIVITY_RECORD_APPROVAL,
    INTERRUPTED_MESSAGE,
    RecordApprovalInput,
    argument_digest,
)


async def record_approval(services: Services, inp: RecordApprovalInput) -> None:
    await ApprovalStore(services.store).record(inp.model_dump())


async def run_approved(
    services: Services, inp: ToolCallInput, run: Callable[[], Awaitable[ToolCallOutput]]
) -> ToolCallOutput:
    """Run an approved call once: claim its grant, run, keep the result; or say why it does not run."""
    assert inp.approval_id is not None
    approvals = ApprovalStore(services.store)
    sid = inp.session.session_id
    digest = argument_digest(inp.arguments)
    if await approvals.claim(sid, inp.approval_id, digest):
        try:
            out = await run()
        except Exception as exc:
            # Raised, it would be retried, and the retry would find the grant spent: the failure is the
            # call's result instead, kept like any other.
            detail = exc.message if isinstance(exc, ApplicationError) else f"{type(exc).__name__}: {exc}"
            out = ToolCallOutput(
                content=f"The approved call of {inp.name} failed: {detail[:1000]}. It was not retried: an "
                "approval covers one run.",
                is_error=True,
            )
        await approvals.save_result(sid, inp.approval_id, out.model_dump_json())
        return out
    row = await approvals.get(sid, inp.approval_id)
    if row is None or row.outcome != "approved":
        return ToolCallOutput(
            content=f"The call of {inp.name} has no recorded approval in the store; it did not run.", is_error=True
        )
    if row.digest != digest:
        return ToolCallOutput(
            content=f"The arguments of this {inp.name} call differ from the approved ones; it did not run.",
            is_error=True,
        )
    if row.result is not None:
        activity.logger.info("approval %s already consumed: returning the stored result", inp.approval_id)
        return ToolCallOutput.model_validate_json(row.result)
    activity.logger.warning("approval %s consumed by an interrupted attempt: not run again", inp.approval_id)
    return ToolCallOutput(content=INTERRUPTED_MESSAGE.format(tool=inp.name), is_error=True)


class ApprovalActivities(ActivityClass):
    """The audit record of each approval decision."""

    @activity.defn(name=ACTIVITY_RECORD_APPROVAL)
    async def record_approval(self, inp: RecordApprovalInput) -> None:
        await record_approval(await self._services.get(), inp)
