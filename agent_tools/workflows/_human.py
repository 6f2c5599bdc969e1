"""askUser inside the session: the turn waits durably for the user's answers.

The wait is a ``workflow.wait_condition``: no activity runs and no timer exists unless the agent has a
timeout policy, so a session may wait for weeks at no cost (the worker may evict it from its cache; it
replays when the answer arrives). Answers come by the ``answer_questions`` update (refused with a reason
when they do not fit) or by the ``answer_questions_signal`` signal (a bad answer is recorded as a rejected
answer instead, since a signal cannot be refused). Both keep unanswered questions pending.
"""

import asyncio
from datetime import datetime, timedelta

from temporalio.common import RawValue

from agent_tools._activity_io import ToolCallOutput
from agent_tools._boundaries import (
    NOTE_CHARS,
    cap_text,
    clean_text,
    input_problems,
)
from agent_tools._messages import ToolCall
from agent_tools._session import ParkedCall, SessionStatus
from agent_tools._session_names import (
    QUERY_HUMAN_STATE,
    QUERY_PENDING_QUESTIONS,
    SIGNAL_ANSWER_QUESTIONS,
    UPDATE_ANSWER_QUESTIONS,
)
from agent_tools.contracts._human import (
    MAX_ANSWERED_KEPT,
    MAX_REJECTED_KEPT,
    REJECTED_PREVIEW_BYTES,
    AnswerAccepted,
    AnsweredAsk,
    AnswerQuestions,
    AnswerRejected,
    AnswerVia,
    AskUserArgs,
    HumanState,
    PendingAsk,
    PendingQuestion,
    RejectedAnswer,
    default_answer,
    format_answers,
    render_pending,
    resolve_answers,
)
from agent_tools.workflows._base import read_signal, signal_rejection
from agent_tools.workflows._native import NativeHandler, ResumeHandler
from agent_tools.workflows._port import CapabilityPart, query, signal, update


class HumanPart(CapabilityPart):
    """askUser, the ``answer_questions`` update and signal, and the questions' queries."""

    def native_tools(self) -> dict[str, NativeHandler]:
        return {"askUser": self._tool_ask_user}

    def resume_handlers(self) -> dict[str, ResumeHandler]:
        return {"askUser": self._resume_ask_user}

    # ---- the tool -----------------------------------------------------------------------------------

    async def _tool_ask_user(self, args: AskUserArgs, call: ToolCall) -> ToolCallOutput:
        human = self.state.human
        timeout = self._ask_timeout()
        now = self.port.now()
        ask = PendingAsk(
            ask_id=call.id or self.port.uuid4(),
            questions=list(args.questions),
            asked_at=now.isoformat(),
            deadline=(now + timeout).isoformat() if timeout else None,
        )
        human.pending.append(ask)
        self.port.publish(
            "question",
            ask_id=ask.ask_id,
            questions=[q.model_dump() for q in ask.questions],
            deadline=ask.deadline,
        )
        self.port.set_status(SessionStatus.waiting_for_user)
        self.port.refresh_details()
        return await self._await_answers(ask, self.port.parked_call(call, "askUser", ask.ask_id))

    async def _resume_ask_user(self, parked: ParkedCall, call: ToolCall) -> ToolCallOutput:
        """The askUser call of a step the previous run continued-as-new in: wait on for the carried ask."""
        ask = next((a for a in self.state.human.pending if a.ask_id == parked.ref), None)
        if ask is None:
            return ToolCallOutput(content="askUser: the question was lost across continue-as-new", is_error=True)
        return await self._await_answers(ask, parked)

    async def _await_answers(self, ask: PendingAsk, parked: ParkedCall | None) -> ToolCallOutput:
        human = self.state.human
        timeout = self._ask_timeout()
        # The deadline is the ask's own (set when it was asked): a wait resumed by a new run keeps it.
        remaining = (datetime.fromisoformat(ask.deadline) - self.port.now()).total_seconds() if ask.deadline else None
        timed_out = False
        try:
            if remaining is not None and remaining <= 0:
                timed_out = not ask.complete()
            else:
                await self.port.parked_wait(parked, ask.complete, timeout=remaining, summary="askUser timeout")
        except TimeoutError:
            timed_out = True
        except asyncio.CancelledError:
            # The session was stopped while waiting: the question is no longer pending.
            human.pending = [a for a in human.pending if a.ask_id != ask.ask_id]
            raise
        policy = self.config.options.ask_user_default
        if timed_out:
            for q in ask.unanswered():
                default = default_answer(q, str(policy) if policy else None)
                if default is not None:
                    default.answered_at = self.now_iso()
                    ask.answers[q.question] = default
        human.pending = [a for a in human.pending if a.ask_id != ask.ask_id]
        answers = [ask.answers[q.question] for q in ask.questions if q.question in ask.answers]
        human.answered.append(
            AnsweredAsk(
                ask_id=ask.ask_id,
                asked_at=ask.asked_at,
                finished_at=self.now_iso(),
                answers=answers,
                timed_out=timed_out,
            )
        )
        del human.answered[:-MAX_ANSWERED_KEPT]
        if not human.pending and not self.state.approvals.waiting():
            self.port.set_status(SessionStatus.running)
        self.port.refresh_details()
        content = format_answers(
            ask.questions, ask.answers, timeout_seconds=timeout.total_seconds() if timeout else None
        )
        return ToolCallOutput(
            content=content,
            data={"ask_id": ask.ask_id, "answers": [a.model_dump() for a in answers], "timed_out": timed_out},
        )

    def _ask_timeout(self) -> timedelta | None:
        """The agent's optional policy: ``options.ask_user_timeout_seconds`` (no timeout by default)."""
        seconds = self.config.options.ask_user_timeout_seconds or 0.0
        return timedelta(seconds=seconds) if seconds > 0 else None

    # ---- answers in ---------------------------------------------------------------------------------

    def _apply_answers(self, request: AnswerQuestions, via: AnswerVia) -> AnswerAccepted:
        resolved = resolve_answers(self.state.human.pending, request)
        at = self.now_iso()
        for ask, answer in resolved:
            answer.via = via
            answer.answered_at = at
            ask.answers[answer.question] = answer
        self.port.publish("answer", via=via, answers=[a.model_dump() for _, a in resolved])
        self.touch()
        self.port.refresh_details()
        return AnswerAccepted(
            accepted=[a.question for _, a in resolved], remaining=len(self.state.human.pending_questions())
        )

    def update_answer_questions(self, request: AnswerQuestions) -> AnswerAccepted:
        return self._apply_answers(request, "update")

    def validate_answer_questions(self, request: AnswerQuestions) -> None:
        # Raising here refuses the update before it reaches history; the caller sees the reason.
        problems = input_problems(request)
        if problems is not None:
            raise AnswerRejected(f"answers out of bounds: {problems}")
        resolve_answers(self.state.human.pending, request)

    def signal_answer_questions(self, payload: RawValue) -> None:
        # Decoded by hand (read_signal), so that every rejected signal is recorded.
        size = len(payload.payload.data)
        try:
            request = read_signal(
                payload, AnswerQuestions, AnswerRejected, subject="answers", verb="are", noun="answers"
            )
            self._apply_answers(request, "signal")
        except Exception as exc:  # anything a client sends: recorded, never a failed workflow task
            reason = signal_rejection(exc, AnswerRejected, noun="answers")
            self._reject_signal(reason, preview=payload.payload.data[:REJECTED_PREVIEW_BYTES], size=size)

    def _reject_signal(self, reason: str, *, preview: bytes, size: int) -> None:
        reason = cap_text(clean_text(reason), NOTE_CHARS, what="the reason")
        self.state.human.rejected.append(
            RejectedAnswer(
                at=self.now_iso(), reason=reason, preview=clean_text(preview.decode("utf-8", "replace")), size=size
            )
        )
        del self.state.human.rejected[:-MAX_REJECTED_KEPT]
        self.port.publish("answer", via="signal", rejected=True, reason=reason)
        self.touch()

    def query_pending_questions(self) -> list[PendingQuestion]:
        return self.state.human.pending_questions()

    def query_human_state(self) -> HumanState:
        return self.state.human

    # ---- hooks --------------------------------------------------------------------------------------

    async def on_stop(self, reason: str) -> None:
        self.state.human.pending = []

    def details_sections(self) -> list[str]:
        sections: list[str] = []
        if self.state.human.pending:
            sections.append("**Waiting for the user**\n" + render_pending(self.state.human))
        return sections

    HANDLERS = (
        update(UPDATE_ANSWER_QUESTIONS, update_answer_questions, validate_answer_questions),
        signal(SIGNAL_ANSWER_QUESTIONS, signal_answer_questions),
        query(QUERY_PENDING_QUESTIONS, query_pending_questions),
        query(QUERY_HUMAN_STATE, query_human_state),
    )
