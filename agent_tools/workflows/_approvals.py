"""Tool approvals inside the session: a call that needs a person's approval waits durably for it.

The wait is a ``workflow.wait_condition`` like askUser's: no timer unless the agent sets a timeout, so a
call may wait for weeks at no cost. Everything about the wait lives in ``SessionState.approvals`` (looked
up by approval id, never held in a local), so the state a continue-as-new carries is all it needs. It is a
parked wait (``SessionPort.parked_wait``): a run may continue-as-new while the call waits, and
the new run resumes the wait (``resume_approval``) and then runs the tool, with the approval's own deadline.

Decisions come by the ``decide_approval`` update (refused with a reason when they do not fit: unknown or
already decided id, a digest other than the call's, a decider not among the approvers) or by the
``decide_approval_signal`` signal (a bad decision is recorded as rejected instead, since a signal cannot be
refused). A decision is consumed once: the waiting call moves it to ``decided``, and any later decision for
the same id is refused. Each decision is written to the store (audit); an approved one is also the grant
the tool activity claims once before it runs the tool (agent_tools/activities/_approvals.py).
"""

import asyncio
from datetime import datetime, timedelta

from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

from agent_tools._activity_io import ToolCallOutput
from agent_tools._boundaries import (
    NOTE_CHARS,
    cap_text,
    clean_text,
    input_problems,
)
from agent_tools._errors import InvalidInput, error_type
from agent_tools._messages import ToolCall
from agent_tools._session import ParkedCall, SessionStatus
from agent_tools._session_names import (
    QUERY_APPROVAL_STATE,
    QUERY_PENDING_APPROVALS,
    SIGNAL_DECIDE_APPROVAL,
    UPDATE_DECIDE_APPROVAL,
)
from agent_tools.contracts._approvals import (
    ACTIVITY_RECORD_APPROVAL,
    MAX_DECIDED_KEPT,
    MAX_REJECTED_DECISIONS_KEPT,
    REJECTED_PREVIEW_BYTES,
    ApprovalAccepted,
    ApprovalDecision,
    ApprovalRejected,
    ApprovalState,
    ApprovalVia,
    DecidedApproval,
    PendingApproval,
    RecordApprovalInput,
    RecordedDecision,
    RejectedDecision,
    argument_digest,
    arguments_preview,
    check_decision,
    denied_message,
    render_pending_approvals,
    timeout_message,
)
from agent_tools.workflows._base import (
    local_call_options,
    read_signal,
    signal_rejection,
    tool_error,
)
from agent_tools.workflows._port import CapabilityPart, SessionPort, query, signal, update


class ApprovalsPart(CapabilityPart):
    """The approval gate of tool calls, the ``decide_approval`` update and signal, and their queries."""

    def __init__(self, port: SessionPort) -> None:
        super().__init__(port)
        # The approvals a call of this run waits on (run-local: a new run starts with none).
        self._waiters: set[str] = set()

    # ---- the gate ---------------------------------------------------------------------------------

    def _needs_approval(self, call: ToolCall) -> bool:
        approvals = self.config.approvals
        return approvals is not None and call.name in approvals.tools

    async def await_approval(self, call: ToolCall) -> tuple[ToolCallOutput | None, str | None]:
        """Wait for a decision on this call: (the tool error when it must not run, the approval id when it may)."""
        if not self._needs_approval(call):
            return None, None
        approvals = self.config.approvals
        assert approvals is not None
        state = self.state.approvals
        seconds = approvals.timeout_seconds or 0.0
        timeout = timedelta(seconds=seconds) if seconds > 0 else None
        now = self.port.now()
        digest = argument_digest(call.arguments)
        carried = self._carried_approval(call, digest)
        if carried is not None:
            # The same call, waiting in the run this one continued from: its approval (and any decision it got
            # meanwhile) carries over, and so does what is left of its deadline.
            approval_id = carried.approval_id
            timeout, seconds = self._remaining_wait(carried)
        else:
            approval_id = f"apr_{self.port.uuid4().replace('-', '')[:20]}"
            state.pending.append(
                PendingApproval(
                    approval_id=approval_id,
                    call_id=call.id,
                    tool=call.name,
                    arguments_preview=arguments_preview(call.arguments),
                    digest=digest,
                    requested_at=now.isoformat(),
                    deadline=(now + timeout).isoformat() if timeout else None,
                    approvers=list(approvals.approvers),
                )
            )
            pending = self._pending_approval(approval_id)
            assert pending is not None
            self.port.publish(
                "approval",
                state="pending",
                approval_id=approval_id,
                call_id=call.id,
                tool=call.name,
                arguments=pending.arguments_preview,
                digest=pending.digest,
                deadline=pending.deadline,
                approvers=pending.approvers,
            )
        # A parked wait: the run may continue-as-new while the call waits, and the new run resumes
        # it (``resume_approval``).
        parked = self.port.parked_call(call, "approval", approval_id)
        return await self._decide_call(call, approval_id, timeout, seconds, parked)

    async def resume_approval(self, parked: ParkedCall, call: ToolCall) -> tuple[ToolCallOutput | None, str | None]:
        """The approval wait of a call the previous run continued-as-new in: wait on for the carried approval
        (a decision that came during the hand-over is in its record), with what is left of its deadline."""
        pending = self._pending_approval(parked.ref)
        if pending is None:
            return tool_error(
                f"The approval of {call.name} was lost across continue-as-new; the call did not run."
            ), None
        timeout, seconds = self._remaining_wait(pending)
        return await self._decide_call(call, pending.approval_id, timeout, seconds, parked)

    def _remaining_wait(self, pending: PendingApproval) -> tuple[timedelta | None, float]:
        """(what is left of the approval's own deadline, the whole timeout it was asked with)."""
        if pending.deadline is None:
            return None, 0.0
        deadline = datetime.fromisoformat(pending.deadline)
        seconds = (deadline - datetime.fromisoformat(pending.requested_at)).total_seconds()
        return max(deadline - self.port.now(), timedelta(milliseconds=1)), seconds

    async def _decide_call(
        self,
        call: ToolCall,
        approval_id: str,
        timeout: timedelta | None,
        seconds: float,
        parked: ParkedCall | None,
    ) -> tuple[ToolCallOutput | None, str | None]:
        """Wait for the decision on ``approval_id`` and consume it, once."""
        state = self.state.approvals
        self._waiters.add(approval_id)
        self.port.set_status(SessionStatus.waiting_for_user)
        self.port.refresh_details()
        try:
            await self.port.parked_wait(
                parked, lambda: self._decision_of(approval_id) is not None, timeout=timeout, summary="approval timeout"
            )
        except TimeoutError:
            pass  # a decision that came in the same activation still counts (read below)
        except asyncio.CancelledError:
            # The session was stopped while waiting: the approval is no longer pending.
            state.pending = [p for p in state.pending if p.approval_id != approval_id]
            raise
        finally:
            self._waiters.discard(approval_id)
        # Consumed here, once: the approval leaves ``pending``, so no later decision can reach it.
        pending = self._pending_approval(approval_id)
        assert pending is not None
        decision = pending.decision
        state.pending = [p for p in state.pending if p.approval_id != approval_id]
        outcome = "timed_out" if decision is None else ("approved" if decision.approve else "denied")
        decided = DecidedApproval(
            approval_id=approval_id,
            call_id=pending.call_id,
            tool=pending.tool,
            digest=pending.digest,
            outcome=outcome,
            reason=decision.reason if decision else None,
            decided_by=decision.decided_by if decision else None,
            via=decision.via if decision else None,
            requested_at=pending.requested_at,
            decided_at=decision.decided_at if decision else self.now_iso(),
        )
        state.decided.append(decided)
        del state.decided[:-MAX_DECIDED_KEPT]
        recorded = await self._record_decision(decided, pending.arguments_preview)
        self.port.publish(
            "approval",
            state=outcome,
            approval_id=approval_id,
            call_id=call.id,
            tool=call.name,
            decided_by=decided.decided_by,
            reason=decided.reason,
        )
        if not self.state.human.pending and not state.waiting():
            self.port.set_status(SessionStatus.running)
        self.port.refresh_details()
        if decision is None:
            return tool_error(timeout_message(call.name, seconds)), None
        if not decision.approve:
            return tool_error(denied_message(call.name, decision.reason, decision.decided_by)), None
        if not recorded:
            # Fail closed: without its grant in the store the activity could not tell a retry from a first run.
            return tool_error(f"The approval of {call.name} could not be recorded; the call did not run."), None
        return None, approval_id

    async def _record_decision(self, decided: DecidedApproval, preview: str) -> bool:
        try:
            # A local activity: one small store write, which would otherwise cost a round trip through the
            # server (and three history events) between the decision and the call.
            await self.port.execute_activity(
                ACTIVITY_RECORD_APPROVAL,
                RecordApprovalInput(
                    session_id=self.config.session_id, arguments_preview=preview, **decided.model_dump()
                ),
                result_type=None,
                summary=f"record approval {decided.outcome}: {decided.tool}",
                options=local_call_options(self.config.policy.engine),
                local=True,
            )
        except ActivityError:
            self.port.logger.exception("approval %s could not be recorded", decided.approval_id)
            return False
        return True

    def _carried_approval(self, call: ToolCall, digest: str) -> PendingApproval | None:
        """A pending approval of this call that no call of this run waits on: one a continue-as-new carried
        while its call waited (the call is re-entered in the new run and takes it over)."""
        return next(
            (
                p
                for p in self.state.approvals.pending
                if p.call_id == call.id and p.digest == digest and p.approval_id not in self._waiters
            ),
            None,
        )

    def _pending_approval(self, approval_id: str) -> PendingApproval | None:
        return next((p for p in self.state.approvals.pending if p.approval_id == approval_id), None)

    def _decision_of(self, approval_id: str) -> RecordedDecision | None:
        pending = self._pending_approval(approval_id)
        return pending.decision if pending is not None else None

    # ---- decisions in -----------------------------------------------------------------------------

    def _apply_decision(self, decision: ApprovalDecision, via: ApprovalVia) -> ApprovalAccepted:
        found = check_decision(self.state.approvals, decision)
        reason = cap_text(clean_text(decision.reason), NOTE_CHARS, what="the reason") if decision.reason else None
        found.decision = RecordedDecision(
            approve=decision.approve,
            reason=reason,
            decided_by=clean_text(decision.decided_by) if decision.decided_by else None,
            via=via,
            decided_at=self.now_iso(),
        )
        self.port.publish(
            "approval",
            state="decided",
            approval_id=found.approval_id,
            tool=found.tool,
            approve=decision.approve,
            via=via,
        )
        self.touch()
        self.port.refresh_details()
        return ApprovalAccepted(
            approval_id=found.approval_id, approved=decision.approve, remaining=len(self.state.approvals.waiting())
        )

    def update_decide_approval(self, decision: ApprovalDecision) -> ApprovalAccepted:
        try:
            return self._apply_decision(decision, "update")
        except ApprovalRejected as exc:
            # Two decisions for one approval in the same activation both pass their validators; the second
            # is refused here. An ApplicationError fails that update, never the workflow task.
            raise ApplicationError(str(exc), type=error_type(InvalidInput), non_retryable=True) from None

    def validate_decide_approval(self, decision: ApprovalDecision) -> None:
        # Raising here refuses the update before it reaches history; the caller sees the reason.
        problems = input_problems(decision)
        if problems is not None:
            raise ApprovalRejected(f"decision out of bounds: {problems}")
        check_decision(self.state.approvals, decision)

    def signal_decide_approval(self, payload: RawValue) -> None:
        # Decoded by hand (read_signal), so that every rejected signal is recorded.
        size = len(payload.payload.data)
        try:
            decision = read_signal(
                payload, ApprovalDecision, ApprovalRejected, subject="the decision", verb="is", noun="decision"
            )
            self._apply_decision(decision, "signal")
        except Exception as exc:  # anything a client sends: recorded, never a failed workflow task
            reason = signal_rejection(exc, ApprovalRejected, noun="decision")
            self._reject_decision(reason, preview=payload.payload.data[:REJECTED_PREVIEW_BYTES], size=size)

    def _reject_decision(self, reason: str, *, preview: bytes, size: int) -> None:
        reason = cap_text(clean_text(reason), NOTE_CHARS, what="the reason")
        rejected = self.state.approvals.rejected
        rejected.append(
            RejectedDecision(
                at=self.now_iso(), reason=reason, preview=clean_text(preview.decode("utf-8", "replace")), size=size
            )
        )
        del rejected[:-MAX_REJECTED_DECISIONS_KEPT]
        self.port.publish("input_rejected", input=SIGNAL_DECIDE_APPROVAL, reason=reason[:500])
        self.touch()

    def query_pending_approvals(self) -> list[PendingApproval]:
        return self.state.approvals.waiting()

    def query_approval_state(self) -> ApprovalState:
        return self.state.approvals

    # ---- hooks --------------------------------------------------------------------------------------

    async def on_stop(self, reason: str) -> None:
        self.state.approvals.pending = []

    def details_sections(self) -> list[str]:
        sections: list[str] = []
        if self.state.approvals.waiting():
            sections.append("**Waiting for approval**\n" + render_pending_approvals(self.state.approvals))
        return sections

    HANDLERS = (
        update(UPDATE_DECIDE_APPROVAL, update_decide_approval, validate_decide_approval),
        signal(SIGNAL_DECIDE_APPROVAL, signal_decide_approval),
        query(QUERY_PENDING_APPROVALS, query_pending_approvals),
        query(QUERY_APPROVAL_STATE, query_approval_state),
    )
