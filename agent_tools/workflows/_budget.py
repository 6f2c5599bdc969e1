"""Session-tree budgets in the workflow: note the tree's spend after each model step, tell running children
once a ceiling is reached, take the parent's word for it (``budget_reached`` signal), and show the spend
against the ceiling in the Temporal UI's current details.

The rules are pure (:mod:`agent_tools._budget`); model calls are refused by the activities, which read the
tree's spend from the store (:func:`agent_tools.activities._model_calls.check_budget`).
"""

import asyncio

from temporalio.exceptions import ActivityError, ApplicationError

from agent_tools._activity_io import LlmStepOutput
from agent_tools._boundaries import NOTE_CHARS, cap_text, clean_text
from agent_tools._budget import (
    BudgetExceeded,
    BudgetLimits,
    BudgetNotice,
    budget_line,
    exceeded,
    tool_refusal,
    tree_spend,
)
from agent_tools._errors import error_type
from agent_tools._messages import Usage
from agent_tools._session_names import SIGNAL_BUDGET_REACHED
from agent_tools.workflows._port import CapabilityPart, SessionPort, signal


class BudgetPart(CapabilityPart):
    """The tree budget's workflow side (see the module docstring)."""

    def __init__(self, port: SessionPort) -> None:
        super().__init__(port)
        # Signal tasks to children, referenced so they are not garbage-collected while they run.
        self._tasks: list[asyncio.Task[None]] = []

    def on_start(self) -> None:
        if self.state.budget.reached is not None:
            # Reached before a continue-as-new: children started since (none can be) or not yet told.
            self._tell_children()

    def limits(self) -> BudgetLimits:
        o = self.config.options
        return BudgetLimits(cost_usd=o.budget_cost_usd, tokens=o.budget_tokens)

    def tree_spent(self) -> Usage:
        """The best known spend of this session's tree (see :func:`agent_tools._budget.tree_spend`)."""
        return tree_spend(self.state.usage, self.state.tree_usage, self.state.budget)

    def tool_refusal(self, tool: str) -> str | None:
        """Why a call that would start a sub-agent is refused, or None."""
        return tool_refusal(tool, self.limits(), self.tree_spent(), self.state.budget)

    def note_step_spend(self, out: LlmStepOutput) -> None:
        """After a model step: keep the tree's spend the store reported, and act once a ceiling is reached."""
        if out.tree_spent is not None:
            self.state.budget.tree_spent = out.tree_spent
        limits = self.limits()
        if limits.is_set():
            reason = exceeded(limits.cost_usd, limits.tokens, self.tree_spent())
            if reason is not None:
                self._reached(reason)

    def note_refused_step(self, exc: ActivityError) -> None:
        """A model step the budget refused: the tree's ceiling is reached (a sibling's calls, say)."""
        cause: BaseException | None = exc.cause
        while cause is not None and not isinstance(cause, ApplicationError):
            cause = getattr(cause, "cause", None)
        if isinstance(cause, ApplicationError) and cause.type == error_type(BudgetExceeded):
            self._reached(cause.message.removeprefix("model call refused: "))

    def _reached(self, reason: str) -> None:
        b = self.state.budget
        if b.reached is None:
            b.reached = cap_text(reason, NOTE_CHARS, what="the reason")
            self.port.publish("budget", reason=b.reached, spent=self.tree_spent().model_dump())
            self.port.refresh_details()
        self._tell_children()

    def _tell_children(self) -> None:
        b = self.state.budget
        for rec in self.state.delegation.running():
            if rec.session_id in b.told:
                continue
            b.told.append(rec.session_id)
            notice = BudgetNotice(reason=cap_text(f"{self.config.session_id}: {b.reached}", NOTE_CHARS))
            self._tasks.append(asyncio.create_task(self._signal(rec.session_id, notice)))

    async def _signal(self, child_id: str, notice: BudgetNotice) -> None:
        try:
            await self.port.signal_external(child_id, SIGNAL_BUDGET_REACHED, notice)
        except Exception as exc:  # the child has ended meanwhile: nothing to tell
            self.port.logger.info("budget signal to %s not delivered: %s", child_id, exc)

    def on_budget_reached(self, notice: BudgetNotice) -> None:
        """The parent says the tree's budget is spent: refuse new sub-agents, tell this session's children.
        (Model calls are refused anyway: each checks the tree's spend in the store.)"""
        reason = f"told by the parent {cap_text(clean_text(notice.reason), NOTE_CHARS, what='the reason')}"
        if not self.port.prepared:
            # Before the session is prepared: kept, and acted on when the run starts (on_start).
            self.state.budget.reached = self.state.budget.reached or reason
            return
        self._reached(reason)

    def details_sections(self) -> list[str]:
        line = budget_line(self.limits(), self.tree_spent(), self.state.budget)
        return [line] if line is not None else []

    HANDLERS = (signal(SIGNAL_BUDGET_REACHED, on_budget_reached),)
