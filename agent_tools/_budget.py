"""Budgets over a session tree: a cost and a token ceiling that count every model call of a session and of
all its descendants.

One mechanism serves the tree budget and spawn_agent's cost ceiling: the tree's spend. Every model call
writes a usage row keyed by the tree's root (the session step, delegate_to_model, webFetch's extraction,
the goal judge), so the store's sum over the root is the live spend of the whole tree, running children
included. A model call with a budget asks the store first and is refused once a ceiling is reached
(:class:`BudgetExceeded`); a model step returns the tree's spend to the workflow, which refuses new
sub-agents, tells its running children, and shows the spend against the ceiling in the Temporal UI.

Limits come from the organisation's defaults (``Settings.budgets``), the agent's options and the request's
(``SessionOptions.budget_cost_usd`` / ``budget_tokens``); ``prepare_session`` writes the resolved limits into
the session's options, which every child inherits, so the whole tree checks one ceiling.

Pure: no temporalio import, no I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agent_tools._boundaries import NOTE_CHARS, limit
from agent_tools._errors import ProviderRequestError
from agent_tools._messages import Usage

__all__ = [
    "CHILD_STARTING_TOOLS",
    "BudgetExceeded",
    "BudgetLimits",
    "BudgetNotice",
    "BudgetSettings",
    "BudgetState",
    "TreeBudget",
    "budget_line",
    "exceeded",
    "tool_refusal",
    "tree_spend",
]

# The tools that start a new sub-agent (spawn_agent refuses in its own error shape, see workflows/delegation).
CHILD_STARTING_TOOLS = frozenset({"subAgent", "invoke_sub_agent", "hand_off_to_agent"})


class BudgetExceeded(ProviderRequestError):
    """A model call refused because the session tree's budget is spent.

    A :class:`ProviderRequestError`, so every caller treats it as a request no retry can fix: a session
    step fails for good with this message, delegate_to_model returns it as a tool error, webFetch hands over
    the page's start instead of an extraction.
    """


class BudgetLimits(BaseModel):
    """A cost ceiling and a token ceiling (None: no ceiling of that kind)."""

    model_config = ConfigDict(extra="forbid")

    cost_usd: float | None = Field(default=None, ge=0, le=1e6)
    # Input plus output tokens of every model call of the tree.
    tokens: int | None = Field(default=None, ge=0, le=10**12)

    def is_set(self) -> bool:
        """True when either ceiling is set."""
        return self.cost_usd is not None or self.tokens is not None


class BudgetSettings(BaseModel):
    """The ``budgets`` section of :class:`~agent_tools._settings.Settings`: defaults per organisation.

    ``AGENT_TOOLS_BUDGETS__DEFAULT='{"cost_usd": 5}'``,
    ``AGENT_TOOLS_BUDGETS__ORGANISATIONS='{"acme": {"cost_usd": 20, "tokens": 2000000}}'``. An agent's or a
    request's ``budget_cost_usd`` / ``budget_tokens`` options win over these.
    """

    default: BudgetLimits = Field(default_factory=BudgetLimits)
    organisations: dict[str, BudgetLimits] = Field(default_factory=dict)

    def for_organisation(self, organisation: str) -> BudgetLimits:
        """The organisation's limits, field by field over the default ones."""
        own = self.organisations.get(organisation)
        if own is None:
            return self.default
        return BudgetLimits(
            cost_usd=own.cost_usd if own.cost_usd is not None else self.default.cost_usd,
            tokens=own.tokens if own.tokens is not None else self.default.tokens,
        )


class TreeBudget(BaseModel):
    """What a model call needs to check the budget: the tree (its root) and the ceilings."""

    root_id: str
    cost_usd: float | None = None
    tokens: int | None = None


class BudgetState(BaseModel):
    """The session's view of its tree's spend (carried by continue-as-new with the rest of the state)."""

    # The tree's spend as the store had it after this session's latest model step (running children
    # included); None until a step with a budget ran.
    tree_spent: Usage | None = None
    # Set once the budget is reached: found here, or told by the parent (the message says which).
    reached: str | None = None
    # Children already told that the budget is reached.
    told: list[str] = Field(default_factory=list)


class BudgetNotice(BaseModel):
    """Input of the ``budget_reached`` signal a parent sends its running children."""

    reason: str = Field(default="the session tree's budget is spent", **limit(chars=NOTE_CHARS))


def tree_spend(own: Usage, children: Usage, state: BudgetState) -> Usage:
    """The best known spend of the tree: the store's figure, or what this session counted itself (its own
    calls and its finished children's) where that is more (a step from before budgets had no figure)."""
    local = own + children
    stored = state.tree_spent
    if stored is None:
        return local
    return Usage(
        calls=max(stored.calls, local.calls),
        input_tokens=max(stored.input_tokens, local.input_tokens),
        output_tokens=max(stored.output_tokens, local.output_tokens),
        cost_usd=max(stored.cost_usd, local.cost_usd),
    )


def exceeded(cost_usd: float | None, tokens: int | None, spent: Usage) -> str | None:
    """The refusal once a ceiling is reached, or None."""
    used_tokens = spent.input_tokens + spent.output_tokens
    if cost_usd is not None and spent.cost_usd >= cost_usd:
        return f"the session tree's budget is spent: ${spent.cost_usd:.4f} of its ${cost_usd:.4f} cost ceiling"
    if tokens is not None and used_tokens >= tokens:
        return f"the session tree's budget is spent: {used_tokens:,} of its {tokens:,} token ceiling"
    return None


def tool_refusal(tool: str, limits: BudgetLimits, spent: Usage, state: BudgetState) -> str | None:
    """Why a tool call that would start a sub-agent is refused, or None."""
    if tool not in CHILD_STARTING_TOOLS:
        return None
    reason = state.reached or exceeded(limits.cost_usd, limits.tokens, spent)
    if reason is None:
        return None
    return f"{tool} refused: {reason}; no new sub-agents start. Finish with what you have."


def budget_line(limits: BudgetLimits, spent: Usage, state: BudgetState) -> str | None:
    """The Temporal UI's current-details line: spend against the ceilings, or None without a budget."""
    if not limits.is_set():
        return None
    parts = []
    if limits.cost_usd is not None:
        parts.append(f"${spent.cost_usd:.4f} of ${limits.cost_usd:.4f}")
    if limits.tokens is not None:
        parts.append(f"{spent.input_tokens + spent.output_tokens:,} of {limits.tokens:,} tokens")
    line = "**Budget (whole tree)** " + " · ".join(parts)
    if state.reached:
        line += f"  \n**reached**: {state.reached}"
    return line
