"""Client side of askUser and of tool approvals: read what a session waits on, and answer or decide it.

    pending = await pending_questions(handle)
    await answer_questions(handle, {"Which date library?": "date-fns"})
    await answer_questions(handle, {"Which extras?": ["a", "b"]}, by_signal=True)

``answers`` may be an :class:`~agent_tools.contracts.human.AnswerQuestions`, or the friendly JSON shapes of
:func:`~agent_tools.contracts.human.parse_answer_payload` (question text or header -> label, list of labels, or
``{"other": "free text"}``).

Tool approvals::

    for p in await pending_approvals(handle):
        await decide_approval(handle, p.approval_id, digest=p.digest, approve=True, decided_by="ana")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_tools import _session_names as names
from agent_tools.contracts.approvals import (
    ApprovalAccepted,
    ApprovalDecision,
    ApprovalRejected,
    ApprovalState,
    PendingApproval,
)
from agent_tools.contracts.human import (
    AnswerAccepted,
    AnswerQuestions,
    HumanState,
    PendingQuestion,
    parse_answer_payload,
)

if TYPE_CHECKING:
    from agent_tools._client import SessionHandle


async def answer_questions(handle: SessionHandle, answers: Any, *, by_signal: bool = False) -> AnswerAccepted | None:
    """Answer pending questions.

    By update (default) the session checks the answers first and refuses the ones that do not fit: this raises
    ``temporalio.client.WorkflowUpdateFailedError`` whose cause says why, and the questions stay pending. By
    signal nothing can be refused: a bad answer is recorded as a rejected answer (see :func:`human_state`)
    and the questions stay pending; returns None.

    Raises:
        agent_tools.contracts.human.AnswerRejected: the answers have none of the accepted shapes (local check).
    """
    request = parse_answer_payload(answers)
    if by_signal:
        await handle.workflow.signal(names.SIGNAL_ANSWER_QUESTIONS, request.model_dump(mode="json"))
        return None
    result: AnswerAccepted = await handle.workflow.execute_update(
        names.UPDATE_ANSWER_QUESTIONS, request, result_type=AnswerAccepted
    )
    return result


async def pending_questions(handle: SessionHandle) -> list[PendingQuestion]:
    """The questions the session is waiting on (empty when it waits on none)."""
    result: list[PendingQuestion] = await handle.query(names.QUERY_PENDING_QUESTIONS, list[PendingQuestion])
    return result


async def human_state(handle: SessionHandle) -> HumanState:
    """Pending questions, answered questions (structured) and rejected signalled answers."""
    result: HumanState = await handle.query(names.QUERY_HUMAN_STATE, HumanState)
    return result


async def pending_approvals(handle: SessionHandle) -> list[PendingApproval]:
    """The tool calls the session is waiting to have approved (empty when none)."""
    result: list[PendingApproval] = await handle.query(names.QUERY_PENDING_APPROVALS, list[PendingApproval])
    return result


async def approval_state(handle: SessionHandle) -> ApprovalState:
    """Pending approvals, recent decisions and rejected signalled decisions."""
    result: ApprovalState = await handle.query(names.QUERY_APPROVAL_STATE, ApprovalState)
    return result


async def decide_approval(
    handle: SessionHandle,
    approval_id: str,
    *,
    approve: bool,
    digest: str | None = None,
    reason: str | None = None,
    decided_by: str | None = None,
    by_signal: bool = False,
) -> ApprovalAccepted | None:
    """Approve or deny one pending tool call.

    ``digest`` is the argument digest the decider was shown (:attr:`PendingApproval.digest`); the session
    refuses a decision whose digest is not the call's. Approving requires it; a denial without one reads the
    pending call's. By update (default) a refusal raises :class:`~agent_tools._errors.SessionError` with the
    session's reason; by signal nothing can be refused (a bad decision is recorded, see
    :func:`approval_state`) and this returns None.

    Raises:
        ApprovalRejected: approving without a digest, or a denial for an approval that is not pending.
    """
    if digest is None:
        if approve:
            raise ApprovalRejected("approving needs the digest of the arguments you approve (PendingApproval.digest)")
        found = next((p for p in await pending_approvals(handle) if p.approval_id == approval_id), None)
        if found is None:
            raise ApprovalRejected(f"approval {approval_id!r} is not pending")
        digest = found.digest
    decision = ApprovalDecision(
        approval_id=approval_id, digest=digest, approve=approve, reason=reason, decided_by=decided_by
    )
    if by_signal:
        await handle.workflow.signal(names.SIGNAL_DECIDE_APPROVAL, decision.model_dump(mode="json"))
        return None
    return await handle.update(names.UPDATE_DECIDE_APPROVAL, decision, ApprovalAccepted)


__all__ = [
    "AnswerQuestions",
    "answer_questions",
    "approval_state",
    "decide_approval",
    "human_state",
    "pending_approvals",
    "pending_questions",
]
