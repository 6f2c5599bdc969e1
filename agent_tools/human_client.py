"""Client side of askUser: read a session's pending questions and answer them.

    pending = await pending_questions(handle)
    await answer_questions(handle, {"Which date library?": "date-fns"})
    await answer_questions(handle, {"Which extras?": ["a", "b"]}, by_signal=True)

``answers`` may be an :class:`~agent_tools.contracts.human.AnswerQuestions`, or the friendly JSON shapes of
:func:`~agent_tools.contracts.human.parse_answer_payload` (question text or header -> label, list of labels, or
``{"other": "free text"}``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_tools.contracts.human import (
    AnswerAccepted,
    AnswerQuestions,
    HumanState,
    PendingQuestion,
    parse_answer_payload,
)

if TYPE_CHECKING:
    from agent_tools.client import SessionHandle


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
        await handle.workflow.signal("answer_questions_signal", request.model_dump(mode="json"))
        return None
    result: AnswerAccepted = await handle.workflow.execute_update(
        "answer_questions", request, result_type=AnswerAccepted
    )
    return result


async def pending_questions(handle: SessionHandle) -> list[PendingQuestion]:
    """The questions the session is waiting on (empty when it waits on none)."""
    result: list[PendingQuestion] = await handle.query("pending_questions", list[PendingQuestion])
    return result


async def human_state(handle: SessionHandle) -> HumanState:
    """Pending questions, answered questions (structured) and rejected signalled answers."""
    result: HumanState = await handle.query("human_state", HumanState)
    return result


__all__ = ["AnswerQuestions", "answer_questions", "human_state", "pending_questions"]
