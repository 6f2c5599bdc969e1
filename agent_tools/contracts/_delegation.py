"""Delegation contracts: one child-session engine behind every face.

Faces (one per platform whose tool contracts we implement):

* RTC: ``subAgent`` (async|sync), ``listSubAgent``, ``getSubAgentMessage``, ``stopSubAgent``,
  ``sendMessageToSubAgent``.
* FYAI: ``invoke_sub_agent`` (grants, chains at most 5 deep, bounded waits with ``resume_execution_id``),
  ``hand_off_to_agent`` (the conversation continues in a new session with a specialist).
* codai: ``spawn_agent`` (typed roles, fan-out cap, cost ceiling), ``delegate_to_model`` (one completion on
  another model; an activity tool).

Every face but ``delegate_to_model`` starts (or talks to) a child ``AgentSession`` workflow; the workflow
side lives in :mod:`agent_tools.workflows._delegation`, the look-ups (tree walks, queries, model resolution) in
:mod:`agent_tools.activities._delegation`. This module is pure: models, the roles table and the rules, no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from agent_tools._boundaries import ID_CHARS, LABEL_CHARS, LIST_ITEMS, MESSAGE_CHARS, describe_validation_error, limit
from agent_tools._catalog.spec import CODAI_EXECUTED, ToolLevel, ToolSpec
from agent_tools._messages import Message, Usage

# ---- limits (defaults; a session may override them through ``SessionRequest.options``) ---------------

MAX_CHAIN_DEPTH = 5
"""FYAI: chains of invoke_sub_agent are at most 5 agents deep (the root agent counts)."""
INVOKE_WAIT_SECONDS = 240
"""FYAI: each invoke_sub_agent call waits up to 4 minutes, then reports the run as still running."""
SPAWN_FANOUT_CAP = 4
"""codai: spawn_agent calls per assistant message; calls past the cap are refused."""
COST_CEILING_USD = 5.0
"""codai: once the session tree has spent this much, further spawns are refused."""
SPAWN_MAX_TOKENS = 4096
"""codai: children of spawn_agent answer with at most this many tokens per model call."""
SPAWN_MAX_STEPS = 12
STOP_WAIT_SECONDS = 60
"""How long a stopping session waits for each child to confirm its own stop."""
RESULT_KEEP_CHARS = 16_000
"""A finished child's answer is kept in workflow state (for resume/notification) up to this size."""
MAX_SUBAGENT_DEPTH = 8
"""subAgent trees may nest (RTC), but not without end: a runaway model must not fork forever."""

# A session tunes these limits through ``SessionOptions`` (``delegation_*``); children inherit them.

Face = Literal["subAgent", "invoke_sub_agent", "spawn_agent"]
WaitMode = Literal["async", "sync", "bounded"]


# ---- roles (codai spawn_agent) ---------------------------------------------------------------------


class Role(BaseModel):
    """One row of the spawn_agent roles table."""

    name: str
    tier: str
    max_steps: int
    # None: the caller's own level (``code``), which the agent definition already caps at l4_browser.
    max_level: ToolLevel | None
    purpose: str
    # codai: explore is "read-only facts": its child gets only tools that change nothing (ToolSpec.read_only).
    read_only: bool = False


ROLES: dict[str, Role] = {
    r.name: r
    for r in (
        Role(name="explore", tier="small", max_steps=6, max_level=ToolLevel.l1_http,
             purpose="Read-only facts.", read_only=True),
        Role(name="research", tier="small", max_steps=8, max_level=ToolLevel.l1_http,
             purpose="web_search + http_fetch, returns a sourced summary."),
        Role(name="code", tier="large", max_steps=12, max_level=None,
             purpose="Implement and verify; returns diff or output."),
        Role(name="verify", tier="small", max_steps=6, max_level=ToolLevel.l3_sandbox,
             purpose="Run checks, report PASS/FAIL per check."),
        Role(name="summarize", tier="small", max_steps=3, max_level=ToolLevel.l1_http,
             purpose="Digest one source."),
    )
}  # fmt: skip

RoleName = Literal["explore", "research", "code", "verify", "summarize"]


def clamp_steps(requested: int | None, role: Role) -> int:
    """max_steps is clamped to 1..12 and to the role's own maximum; absent means the role's maximum."""
    if requested is None:
        return role.max_steps
    return max(1, min(requested, SPAWN_MAX_STEPS, role.max_steps))


def message_target_refusal(target: str, parent_id: str | None, record: ChildRecord | None) -> str | None:
    """Why ``sendMessageToSubAgent`` may not message ``target``, or None.

    RTC: "Send an additional message to an *async* sub-agent": the target must be a sub-session of the tree
    (not the root) that its parent started with ``subAgent`` in async mode. A sync child's parent is waiting
    on its answer, and an invoke/spawn child has its own caller; neither takes messages from the side.
    """
    if parent_id is None:
        return f"Session {target!r} is the root of the tree, not a sub-agent; only async sub-agents take messages."
    if record is None or record.face != "subAgent" or record.mode != "async":
        how = "not started by subAgent" if record is None or record.face != "subAgent" else f"a {record.mode} sub-agent"
        return (
            f"Session {target!r} is {how}; sendMessageToSubAgent reaches only async sub-agents "
            '(subAgent with mode "async").'
        )
    return None


def spawn_result_text(role: str, answer: str) -> str:
    """codai: the child's answer comes back as an ordinary tool message with this prefix."""
    return f"SUB-AGENT[{role}] RESULT: {answer}"


def error_json(code: str, **detail: Any) -> str:
    """codai's error results are JSON objects with an ``error`` code; extra keys help the model."""
    return json.dumps({"error": code, **detail}, ensure_ascii=False)


def _codai_invalid(tool: str, error: ValidationError) -> str:
    return error_json("invalid_arguments", detail=describe_validation_error(error))


# ---- the engine's state ----------------------------------------------------------------------------


class PriorMessage(BaseModel):
    role: Literal["user", "assistant"]
    content: str = Field(**limit(chars=MESSAGE_CHARS))


class ChildRecord(BaseModel):
    """One child session, as its parent knows it. Small on purpose: it lives in workflow state."""

    session_id: str
    face: Face
    agent: str
    title: str
    role: str | None = None
    mode: WaitMode = "async"
    # The task as given (trimmed) and the conversation it continued: invoke_sub_agent returns them
    # as messages.
    task: str = ""
    prior: list[PriorMessage] = Field(default_factory=list)
    status: str = "running"
    created_at: str
    updated_at: str
    finished: bool = False
    final_message: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    # Tool calls of this session waiting on the child right now (they receive its end themselves).
    waiters: int = 0
    # Its end reached the parent's model (as a tool result or an inbox notification).
    delivered: bool = False
    # This session asked it to stop: its end is not news to the model.
    stop_requested: bool = False


class HandoffRecord(BaseModel):
    agent_name: str
    session_id: str
    message: str
    at: str


class DelegationState(BaseModel):
    """Children of this session, counters of the per-step fan-out, and the hand-off if any."""

    children: list[ChildRecord] = Field(default_factory=list)
    counter: int = 0
    # Fan-out of spawn_agent is counted per assistant message, identified by the session's step number.
    spawn_step: int = -1
    spawn_in_step: int = 0
    handoff: HandoffRecord | None = None

    def get(self, session_id: str) -> ChildRecord | None:
        return next((c for c in self.children if c.session_id == session_id), None)

    def running(self) -> list[ChildRecord]:
        return [c for c in self.children if not c.finished]


def notification_text(rec: ChildRecord) -> str:
    """What the parent reads in its inbox when an async child ends."""
    if rec.status == "completed":
        head = f"Sub-agent '{rec.title}' ({rec.session_id}) completed."
        return f"{head} Its final message:\n{rec.final_message or ''}"
    if rec.status == "stopped":
        return f"Sub-agent '{rec.title}' ({rec.session_id}) was stopped."
    return f"Sub-agent '{rec.title}' ({rec.session_id}) failed: {rec.error or rec.status}"


# ---- invoke_sub_agent rules --------------------------------------------------------------------------


def invoke_refusal(
    *, caller: str, target: str, grants: list[str], chain: list[str], max_depth: int = MAX_CHAIN_DEPTH
) -> str | None:
    """Why the caller may not invoke ``target`` (None when it may)."""
    if target not in grants:
        return (
            f"Agent {caller!r} is not allowed to call sub-agent {target!r}. Grant {target!r} on the "
            f"Sub-agents tab of {caller!r} (its `subagents` list) and try again."
        )
    if target in chain:
        path = " -> ".join(chain)
        return f"Agent {target!r} is already in the delegation chain {path} and cannot be called again."
    if len(chain) >= max_depth:
        return (
            f"The delegation chain {' -> '.join(chain)} is already {len(chain)} agents deep; chains "
            f"can be at most {max_depth} agents deep."
        )
    return None


def handoff_refusal(*, caller: str, target: str, grants: list[str], parent_id: str | None, already: bool) -> str | None:
    """Static hand-off rules (project and activity of the target are checked by an activity)."""
    if parent_id is not None:
        return "hand_off_to_agent works only in one-to-one chats with an agent, not inside a delegated session."
    if already:
        return "This conversation has already been handed off once; it cannot be handed off again."
    if target == caller:
        return f"Agent {target!r} is the calling agent; hand off to a different specialist."
    if target not in grants:
        return (
            f"Agent {caller!r} may not hand off to {target!r}. Grant {target!r} on the Sub-agents "
            f"tab of {caller!r} "
            f"(its `subagents` list) and try again."
        )
    return None


# ---- tool arguments and results --------------------------------------------------------------------


class SubAgentArgs(BaseModel):
    title: str = Field(
        min_length=1,
        max_length=200,
        description='Short task description (3-5 words), e.g. "Login button fix"',
    )
    instruction: str = Field(
        min_length=1,
        description=("Task instruction for the sub-agent. Must include all necessary context: it starts blank."),
        **limit(chars=MESSAGE_CHARS),
    )
    mode: Literal["async", "sync"] = Field(default="async", description='"async" (default) or "sync"')


ASYNC_RUNNING_NOTE = "The sub-agent runs in the background; you will receive a notification when it ends."
INVOKE_RUNNING_NOTE = (
    "The sub-agent is still working: call invoke_sub_agent again with resume_execution_id to keep waiting."
)


class SubAgentResult(BaseModel):
    sub_session_id: str
    title: str
    mode: Literal["async", "sync"]
    status: str
    result: str | None = None
    error: str | None = None
    # What to do next, inside the JSON object so that the whole result parses.
    note: str | None = None


class NoArgs(BaseModel):
    pass


class SubAgentInfo(BaseModel):
    sub_session_id: str
    title: str
    status: str
    created_at: str | None = None
    updated_at: str | None = None
    # Not in the contract's table, but cheap and useful to tell the tree apart.
    parent_id: str | None = None
    agent: str | None = None


class SubSessionArgs(BaseModel):
    sub_session_id: str = Field(
        min_length=1,
        description="Server-side id of the target sub-session (see listSubAgent)",
        **limit(chars=ID_CHARS),
    )


class SubAgentMessage(BaseModel):
    sub_session_id: str
    sub_session_title: str
    sub_session_status: str
    message_id: str | None
    role: str | None
    content: str
    created_at: str | None


class StoppedSession(BaseModel):
    sub_session_id: str
    title: str


class StopSubAgentResult(BaseModel):
    stopped_sessions: list[StoppedSession]
    total_stopped: int


class SendMessageArgs(BaseModel):
    sub_session_id: str = Field(
        min_length=1, description="Server id of the target async sub-agent session", **limit(chars=ID_CHARS)
    )
    message: str = Field(
        min_length=1, description="The message content to send to the sub-agent", **limit(chars=MESSAGE_CHARS)
    )


class SendMessageResult(BaseModel):
    sub_session_id: str
    status: Literal["delivered"] = "delivered"
    queued_behind: int = 0


class InvokeSubAgentArgs(BaseModel):
    agent_name: str = Field(min_length=1, description="The exact name of the agent to run", **limit(chars=LABEL_CHARS))
    task_input: str = Field(
        default="", description="The task or instructions for the sub-agent", **limit(chars=MESSAGE_CHARS)
    )
    prior_messages: list[PriorMessage] | None = Field(
        default=None,
        description="Messages returned by an earlier call to the same sub-agent, so it remembers them",
        **limit(items=LIST_ITEMS),
    )
    llm_config_override_id: str | None = Field(
        default=None, description="Run the sub-agent on another configured model", **limit(chars=LABEL_CHARS)
    )
    resume_execution_id: str | None = Field(
        default=None, description="Keep waiting on a run that is still going", **limit(chars=ID_CHARS)
    )

    @model_validator(mode="after")
    def _task_or_resume(self) -> InvokeSubAgentArgs:
        if not self.resume_execution_id and not self.task_input.strip():
            raise ValueError("task_input is required unless resume_execution_id is given")
        return self


class InvokeSubAgentResult(BaseModel):
    status: Literal["completed", "running", "failed", "stopped"]
    execution_id: str
    agent_name: str
    output: str | None = None
    error: str | None = None
    # Pass these back as prior_messages on the next call to the same agent to continue the conversation.
    messages: list[PriorMessage] = Field(default_factory=list)
    # What to do next (a running call: resume it), inside the JSON object so that the result parses.
    note: str | None = None


class SpawnAgentArgs(BaseModel):
    task: str = Field(min_length=1, description="What the child should do.", **limit(chars=MESSAGE_CHARS))
    role: RoleName = Field(default="explore", description="Selects tier, tool level and step budget.")
    system: str | None = Field(
        default=None, description="Optional system prompt for the child.", **limit(chars=MESSAGE_CHARS)
    )
    max_steps: int | None = Field(
        default=None,
        description="1 - 12, clamped to the role's own maximum.",
        # The schema says 1-12 as codai does; a larger number is clamped to 12 (then to the role's maximum)
        # rather than refused, and zero or a negative number is a mistake worth saying.
        **limit(minimum=1, maximum=SPAWN_MAX_STEPS),
    )

    @field_validator("max_steps", mode="before")
    @classmethod
    def _clamp_steps(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value > SPAWN_MAX_STEPS:
            return SPAWN_MAX_STEPS
        return value


class HandOffArgs(BaseModel):
    agent_name: str = Field(min_length=1, description="The specialist's exact name", **limit(chars=LABEL_CHARS))
    message: str = Field(
        min_length=1, description="The user's request, in their own words", **limit(chars=MESSAGE_CHARS)
    )


class HandOffResult(BaseModel):
    status: Literal["handed_off"] = "handed_off"
    agent_name: str
    session_id: str


class DelegateToModelArgs(BaseModel):
    model: str = Field(
        min_length=1,
        description="One of the models you may call (a tier name or model spec)",
        **limit(chars=LABEL_CHARS),
    )
    prompt: str = Field(min_length=1, description="The complete request for that model", **limit(chars=MESSAGE_CHARS))
    system: str | None = Field(default=None, description="Optional system prompt", **limit(chars=MESSAGE_CHARS))
    max_tokens: int | None = Field(default=None, ge=1, le=32_000)


class DelegateToModelResult(BaseModel):
    model: str
    content: str
    usage: Usage


# ---- activity names and their inputs/outputs (durable contracts: add optional fields only) ------------


class Caller(BaseModel):
    """The calling session, as the delegation activities need it."""

    session_id: str
    root_id: str
    agent: str
    project: str
    model: str


ACT_PLAN_SPAWN = "agent_tools.delegation.plan_spawn"
ACT_CHECK_AGENT = "agent_tools.delegation.check_agent"
ACT_LIST_TREE = "agent_tools.delegation.list_tree"
ACT_LATEST_MESSAGE = "agent_tools.delegation.latest_message"
ACT_STOP_TREE = "agent_tools.delegation.stop_tree"
ACT_SEND_MESSAGE = "agent_tools.delegation.send_message"
ACT_HANDOFF_HISTORY = "agent_tools.delegation.handoff_history"
ACT_AWAIT_SESSION = "agent_tools.delegation.await_session"


class PlanSpawnInput(BaseModel):
    session: Caller
    role: str
    parent_tools: list[str]


class PlanSpawnOutput(BaseModel):
    model: str
    tools: list[str]


class CheckAgentInput(BaseModel):
    project: str
    agent_name: str
    llm_config_override_id: str | None = None


class CheckAgentOutput(BaseModel):
    error: str | None = None
    model: str | None = None


class TreeInput(BaseModel):
    caller: Caller
    # The caller's own running children, from its state: visibility may lag a child started a moment ago.
    own_children: list[SubAgentInfo] = Field(default_factory=list)


class TreeOutput(BaseModel):
    sessions: list[SubAgentInfo] = Field(default_factory=list)


class TargetInput(BaseModel):
    caller: Caller
    target: str
    message: str | None = None
    reason: str | None = None
    # Deduplicates the update when the activity is retried.
    request_id: str | None = None


class LatestMessageOutput(BaseModel):
    error: str | None = None
    message: SubAgentMessage | None = None


class StopTreeOutput(BaseModel):
    error: str | None = None
    result: StopSubAgentResult | None = None


class SendOutput(BaseModel):
    error: str | None = None
    result: SendMessageResult | None = None


class HandoffHistoryInput(BaseModel):
    caller: Caller
    agent_name: str


class HandoffHistoryOutput(BaseModel):
    error: str | None = None
    history: list[Message] = Field(default_factory=list)


class AwaitSessionInput(BaseModel):
    session_id: str


class AwaitSessionOutput(BaseModel):
    status: str
    final_message: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="subAgent",
        description=(
            "Create a sub-agent session for a complex, multi-step task. The sub-agent starts with a blank "
            "context: give it complete background (file paths, context, approaches ruled out), like briefing a "
            'smart colleague. mode "async" (default) returns the sub-session id at once and you receive a '
            'notification when it ends; "sync" waits for its result.'
        ),
        args_model=SubAgentArgs,
        result_model=SubAgentResult,
        capability="delegation",
        runs_in="workflow",
        interrupts=True,
        summary_arg="title",
    ),
    ToolSpec(
        name="listSubAgent",
        read_only=True,
        description="List all active sub-agent sessions in the current session tree.",
        args_model=NoArgs,
        result_model=SubAgentInfo,
        capability="delegation",
        runs_in="workflow",
    ),
    ToolSpec(
        name="getSubAgentMessage",
        read_only=True,
        description="Get the latest message from a specific sub-agent session of the current session tree.",
        args_model=SubSessionArgs,
        result_model=SubAgentMessage,
        capability="delegation",
        runs_in="workflow",
        summary_arg="sub_session_id",
    ),
    ToolSpec(
        name="stopSubAgent",
        description="Stop a sub-agent session and all its descendant sessions (leaf sessions first).",
        args_model=SubSessionArgs,
        result_model=StopSubAgentResult,
        capability="delegation",
        runs_in="workflow",
        summary_arg="sub_session_id",
    ),
    ToolSpec(
        name="sendMessageToSubAgent",
        description=(
            "Send an additional message to a running async sub-agent: extra instructions, context, or an answer "
            "to its question. It starts the sub-agent's next turn (or queues behind the current one)."
        ),
        args_model=SendMessageArgs,
        result_model=SendMessageResult,
        capability="delegation",
        runs_in="workflow",
        summary_arg="sub_session_id",
    ),
    ToolSpec(
        name="invoke_sub_agent",
        description=(
            "Run another agent as a tool and use its answer. Only agents granted on your Sub-agents tab can be "
            'called. Each call waits up to 4 minutes; if the sub-agent is still working you get "status": '
            '"running" with an execution_id: call again with resume_execution_id to keep waiting. Pass the '
            "returned messages as prior_messages to continue a conversation with the same sub-agent."
        ),
        args_model=InvokeSubAgentArgs,
        result_model=InvokeSubAgentResult,
        capability="delegation",
        runs_in="workflow",
        summary_arg="agent_name",
    ),
    ToolSpec(
        name="spawn_agent",
        level=CODAI_EXECUTED,
        description=(
            "Spawn a typed sub-agent with its own context and tool loop. Roles: explore (read-only facts, "
            "default), research (sourced summary), code (implement and verify), verify (PASS/FAIL per check), "
            "summarize (digest one source). Several spawns in one message run in parallel (at most 4 per "
            "message)."
        ),
        args_model=SpawnAgentArgs,
        capability="delegation",
        runs_in="workflow",
        summary_arg="role",
        invalid_arguments=_codai_invalid,
    ),
    ToolSpec(
        name="hand_off_to_agent",
        description=(
            "Hand the current one-to-one conversation over to a specialist agent (granted on your Sub-agents "
            "tab). The specialist continues with the user in a new session with the full history. Only once."
        ),
        args_model=HandOffArgs,
        result_model=HandOffResult,
        capability="delegation",
        runs_in="workflow",
        interrupts=True,
        summary_arg="agent_name",
    ),
    ToolSpec(
        name="delegate_to_model",
        level=CODAI_EXECUTED,
        description=(
            "One completion on another model you may call (a tier name such as small/large, or a model spec)."
        ),
        args_model=DelegateToModelArgs,
        result_model=DelegateToModelResult,
        capability="delegation",
        runs_in="activity",
        summary_arg="model",
        invalid_arguments=_codai_invalid,
    ),
]
