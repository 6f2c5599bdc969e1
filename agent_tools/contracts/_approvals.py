"""Tool approvals: which calls need a person's approval, what is pending, the decisions people send back.

Everything here is pure (no Temporal, no I/O): the session workflow, the update validator, the signal
handler, the client and the CLI share these rules, so a decision the CLI accepts is one the workflow
accepts, and a refusal reads the same everywhere.

An approval is bound to one call: its call id and the digest (SHA-256 of the canonical JSON) of its
arguments. The person deciding sends back the digest they were shown; a different digest is refused, so an
approval can never cover arguments its approver did not see.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictBool

from agent_tools._boundaries import ID_CHARS, LABEL_CHARS, NOTE_CHARS, clean_text, limit
from agent_tools._catalog.spec import ToolLevel, ToolSpec
from agent_tools._errors import InvalidInput

# History the session keeps (carried by continue-as-new, so bounded).
MAX_DECIDED_KEPT = 50
MAX_REJECTED_DECISIONS_KEPT = 20
REJECTED_PREVIEW_BYTES = 200
# The arguments as the pending approval shows them (the digest covers them whole).
ARGUMENTS_PREVIEW_CHARS = 2_000
DIGEST_CHARS = 64
MAX_APPROVERS = 50
MAX_PATTERNS = 100

ApprovalVia = Literal["update", "signal"]
ApprovalOutcome = Literal["approved", "denied", "timed_out"]


# ---- the policy ----------------------------------------------------------------------------------------


class ApprovalPolicy(BaseModel):
    """Which of an agent's tools need a person's approval before each call, and who decides.

    Set on an agent (``AgentDefinition.approval``) or in a session's options (``options.approval``). A
    request's policy can only add tools to the agent's (the union of both is required), so a client cannot
    start a session that skips the approvals its agent demands.
    """

    require: list[Annotated[str, Field(**limit(chars=LABEL_CHARS))]] = Field(
        default_factory=list,
        description="fnmatch patterns on tool names (``mcp__github__*``, ``exec_python``)",
        **limit(items=MAX_PATTERNS),
    )
    min_level: ToolLevel | None = Field(
        default=None, description="Tools at or above this codai tool level need approval (``none`` is every tool)"
    )
    timeout_seconds: float | None = Field(
        default=None,
        description="How long a call waits for a decision (unset or 0: until decided)",
        **limit(minimum=0, maximum=366 * 86400),
    )
    approvers: list[Annotated[str, Field(**limit(chars=LABEL_CHARS))]] = Field(
        default_factory=list, description="Who may decide (empty: anyone)", **limit(items=MAX_APPROVERS)
    )


class ResolvedApprovals(BaseModel):
    """The policy resolved against the session's tools when it is prepared (part of its config).

    The workflow cannot see the tools' specs (user and MCP tools live in the worker), so the prepare step
    names the tools; the workflow only looks names up.
    """

    tools: list[str] = Field(default_factory=list)
    timeout_seconds: float | None = None
    approvers: list[str] = Field(default_factory=list)


def requires_approval(policy: ApprovalPolicy | None, tool_name: str, spec: ToolSpec | None) -> bool:
    """Whether a call of ``tool_name`` needs approval: the tool's own flag, a pattern, or its level."""
    if spec is not None and spec.requires_approval:
        return True
    if policy is None:
        return False
    if any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in policy.require):
        return True
    if policy.min_level is not None and spec is not None:
        return spec.level.rank >= policy.min_level.rank
    return False


def resolve_approvals(
    tools: list[str], specs: dict[str, ToolSpec], agent: ApprovalPolicy | None, request: ApprovalPolicy | None
) -> ResolvedApprovals | None:
    """The session's approvals: the agent's and the request's requirements together; None when no tool needs one.

    The timeout and the approvers are the agent's when it sets them, else the request's.
    """
    required = [
        t for t in tools if requires_approval(agent, t, specs.get(t)) or requires_approval(request, t, specs.get(t))
    ]
    if not required:
        return None
    timeout = agent.timeout_seconds if agent is not None and agent.timeout_seconds else None
    if timeout is None and request is not None and request.timeout_seconds:
        timeout = request.timeout_seconds
    approvers = agent.approvers if agent is not None and agent.approvers else (request.approvers if request else [])
    return ResolvedApprovals(tools=required, timeout_seconds=timeout, approvers=list(approvers))


def argument_digest(arguments: dict[str, Any]) -> str:
    """SHA-256 of the arguments' canonical JSON (sorted keys, no spaces, ASCII escapes).

    ASCII escapes keep it defined for any string the model sent, lone surrogates included.
    """
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def arguments_preview(arguments: dict[str, Any]) -> str:
    """The arguments as people read them (cleaned: the store keeps this text, and PostgreSQL refuses a lone
    surrogate)."""
    text = clean_text(json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str))
    if len(text) > ARGUMENTS_PREVIEW_CHARS:
        return text[:ARGUMENTS_PREVIEW_CHARS] + f"… ({len(text)} characters; the digest covers them all)"
    return text


# ---- what is pending, what was decided ------------------------------------------------------------------


class ApprovalDecision(BaseModel):
    """Input of the ``decide_approval`` update and the ``decide_approval_signal`` signal."""

    approval_id: str = Field(min_length=1, **limit(chars=ID_CHARS))
    digest: str = Field(description="The argument digest the decider was shown", **limit(chars=DIGEST_CHARS))
    approve: StrictBool
    reason: str | None = Field(default=None, **limit(chars=NOTE_CHARS))
    decided_by: str | None = Field(default=None, **limit(chars=LABEL_CHARS))


class RecordedDecision(BaseModel):
    approve: StrictBool
    reason: str | None = None
    decided_by: str | None = None
    via: ApprovalVia = "update"
    decided_at: str


class PendingApproval(BaseModel):
    """One tool call waiting for a decision (the ``pending_approvals`` query lists these)."""

    approval_id: str
    call_id: str
    tool: str
    arguments_preview: str
    digest: str
    requested_at: str
    deadline: str | None = None
    approvers: list[str] = Field(default_factory=list)
    # Set by the decision; the waiting call consumes it once and moves the approval to ``decided``.
    decision: RecordedDecision | None = None


class DecidedApproval(BaseModel):
    approval_id: str
    call_id: str
    tool: str
    digest: str
    outcome: ApprovalOutcome
    reason: str | None = None
    decided_by: str | None = None
    via: ApprovalVia | None = None
    requested_at: str
    decided_at: str


class RejectedDecision(BaseModel):
    """A signalled decision that did not fit (recorded small, like a rejected answer)."""

    at: str
    reason: str
    preview: str | None = None
    size: int | None = None


class ApprovalState(BaseModel):
    """Pending and recent approvals (part of SessionState, carried by continue-as-new)."""

    pending: list[PendingApproval] = Field(default_factory=list)
    decided: list[DecidedApproval] = Field(default_factory=list)
    rejected: list[RejectedDecision] = Field(default_factory=list)

    def waiting(self) -> list[PendingApproval]:
        """The pending approvals no decision has reached yet."""
        return [p for p in self.pending if p.decision is None]


class ApprovalAccepted(BaseModel):
    """Result of the ``decide_approval`` update."""

    approval_id: str
    approved: bool
    remaining: int


class ApprovalRejected(InvalidInput):
    """A decision that does not fit the pending approvals; the message says why."""


def check_decision(state: ApprovalState, decision: ApprovalDecision) -> PendingApproval:
    """The pending approval a decision is for.

    Raises:
        ApprovalRejected: unknown id, already decided (a decision is consumed once), a digest other than the
            pending call's, or a decider not among the approvers.
    """
    found = next((p for p in state.pending if p.approval_id == decision.approval_id), None)
    if found is None:
        if any(d.approval_id == decision.approval_id for d in state.decided):
            raise ApprovalRejected(f"approval {decision.approval_id!r} is already decided")
        waiting = ", ".join(repr(p.approval_id) for p in state.waiting()) or "none"
        raise ApprovalRejected(f"unknown approval {decision.approval_id!r}; pending approvals: {waiting}")
    if found.decision is not None:
        raise ApprovalRejected(f"approval {decision.approval_id!r} is already decided")
    if decision.digest.strip().lower() != found.digest:
        raise ApprovalRejected(
            f"the digest does not match the arguments of {found.tool} call {found.call_id!r}: "
            "the decision was made on other arguments; read the pending approval again"
        )
    if found.approvers and (decision.decided_by or "") not in found.approvers:
        who = repr(decision.decided_by) if decision.decided_by else "an anonymous decider"
        raise ApprovalRejected(f"{who} may not decide this approval; approvers: {', '.join(found.approvers)}")
    return found


def denied_message(tool: str, reason: str | None, decided_by: str | None) -> str:
    by = f" by {decided_by}" if decided_by else ""
    why = f": {reason}" if reason else " (no reason given)"
    return f"The call of {tool} was denied{by}{why}. It did not run. Do not retry it unchanged."


def timeout_message(tool: str, seconds: float) -> str:
    return f"The call of {tool} needed a person's approval and none came within {seconds:g} seconds. It did not run."


INTERRUPTED_MESSAGE = (
    "The approved call of {tool} was interrupted (its worker stopped mid-call) and was not run again: an "
    "approval covers one run. Check whether it took effect before asking for it again."
)


def render_pending_approvals(state: ApprovalState) -> str:
    """Markdown of the waiting approvals for the Temporal UI's current details."""
    lines: list[str] = []
    for p in state.waiting():
        who = f" · approvers: {', '.join(p.approvers)}" if p.approvers else ""
        until = f" · until {p.deadline}" if p.deadline else ""
        lines.append(f"- `{p.approval_id}` **{p.tool}**{who}{until}")
        lines.append(f"  arguments: `{p.arguments_preview[:300]}`")
        lines.append(f"  digest: `{p.digest}`")
    return "\n".join(lines)


# ---- the audit activity ---------------------------------------------------------------------------------

ACTIVITY_RECORD_APPROVAL = "agent_tools.approvals.record"


class RecordApprovalInput(DecidedApproval):
    """One decision, as the store keeps it for audit (and, when approved, as the call's grant): the decided
    approval, with its session and the arguments it covered."""

    session_id: str
    arguments_preview: str
