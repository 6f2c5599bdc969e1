"""Session models: what starts a session, the state it carries, and the messages it takes.

All workflow state is one model (:class:`SessionState`), which is exactly what continue-as-new carries.
Every signal, update and query takes one input model. These are durable contracts: add optional fields only.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from agent_tools._activity_io import ToolCallOutput
from agent_tools._boundaries import ID_CHARS, LABEL_CHARS, MESSAGE_CHARS, SCOPE_CHARS, limit
from agent_tools._budget import BudgetState
from agent_tools._messages import Message, Usage
from agent_tools._policy import ExecutionPolicy

# The models a client reads and sends, defined apart so that reading a session loads none of the state.
from agent_tools._session_views import (
    TERMINAL_STATUSES,
    WORKFLOW_NAME,
    LatestMessageView,
    SendMessage,
    SendMessageAccepted,
    SessionResult,
    SessionStatus,
    StatusView,
    StopRequest,
    TriggerKind,
)
from agent_tools.contracts._approvals import ApprovalPolicy, ApprovalState, ResolvedApprovals
from agent_tools.contracts._delegation import DelegationState
from agent_tools.contracts._events.contract import EventWaitState
from agent_tools.contracts._human import HumanState
from agent_tools.contracts._output import MAX_OUTPUT_RETRIES, OutputContract, OutputState
from agent_tools.contracts._planning import PlanningState

__all__ = [
    "TERMINAL_STATUSES",
    "WORKFLOW_NAME",
    "LatestMessageView",
    "ParkedCall",
    "ParkedStep",
    "PrepareInput",
    "PrepareOutput",
    "SendMessage",
    "SendMessageAccepted",
    "SessionConfig",
    "SessionInput",
    "SessionOptions",
    "SessionRequest",
    "SessionResult",
    "SessionState",
    "SessionStatus",
    "StatusView",
    "StopRequest",
    "Trigger",
]


class Trigger(BaseModel):
    """Something that starts a turn."""

    kind: TriggerKind = "user"
    content: str
    meta: dict[str, Any] = Field(default_factory=dict)


class SessionOptions(BaseModel):
    """Per-session switches and limits. An agent's definition sets defaults; a request's own win.

    Durable: sessions carry these in their state, so unknown keys are kept (``extra="allow"``), only set
    keys are serialized (exactly as the plain dict they replace was), and the ranges are schema limits
    checked where a request enters (a recorded history must still decode).
    """

    # NaN and ±Infinity stay numbers when dumped (not null, which the serializer below would drop, leaving
    # no ceiling): the limits' check then refuses them.
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="constants")

    continue_as_new_after_turns: int | None = Field(
        default=None,
        description="Continue-as-new after this many turns of one run",
        **limit(minimum=1, maximum=100_000),
    )
    continue_as_new_after_events: int | None = Field(
        default=None,
        description=(
            "Continue-as-new once a run's history reaches this many events (between turns, and during a durable"
            " wait); Temporal's own suggestion applies either way"
        ),
        # The floor keeps a new run (which starts with a few dozen events) from continuing again at once.
        **limit(minimum=100, maximum=50_000),
    )
    heartbeat_timeout_seconds: float | None = Field(
        default=None, description="Heartbeat timeout of model steps and tool calls", **limit(minimum=0.1, maximum=3600)
    )
    ask_user_timeout_seconds: float | None = Field(
        default=None,
        description="askUser waits this long at most (0 or unset: no limit)",
        **limit(minimum=0, maximum=366 * 86400),
    )
    ask_user_default: str | None = Field(
        default=None,
        description='On an askUser timeout: "first" option, a named label, or none',
        **limit(chars=LABEL_CHARS),
    )
    memory: bool | None = Field(default=None, description="The agent's Memory switch, for this session")
    loop_min_interval_seconds: float | None = Field(
        default=None,
        description="createLoop's shortest interval (cost control; unset: 5 seconds)",
        **limit(minimum=1, maximum=86400),
    )
    search_attributes: bool | None = Field(default=None, description="Set the session search attributes")
    prompt_titles: bool | None = Field(
        default=None,
        description=(
            "Title a session in Temporal's visibility (SessionTitle, kept in plain text: search attributes are"
            " never encoded) by its prompt's start; off: by the agent's name, or a title the client passed"
            " (unset: on, unless a payload codec is configured)"
        ),
    )
    delegation_fanout_cap: int | None = Field(
        default=None, description="spawn_agent calls per message", **limit(minimum=1, maximum=100)
    )
    delegation_cost_ceiling_usd: float | None = Field(
        default=None,
        description="spawn_agent refuses once the tree has spent this much",
        **limit(minimum=0, maximum=1e6),
    )
    delegation_invoke_wait_seconds: float | None = Field(
        default=None, description="How long one invoke_sub_agent call waits", **limit(minimum=0.01, maximum=3600)
    )
    delegation_spill_threshold_chars: int | None = Field(
        default=None,
        description=(
            "The team's Tool Summary Max Characters: the tree root's agent's setting, which its sub-agents use"
        ),
        **limit(minimum=200, maximum=100_000_000),
    )
    handed_off_from: str | None = Field(
        default=None, description="Set on a session a hand-off started", **limit(chars=ID_CHARS)
    )
    stream_text: bool | None = Field(
        default=None, description="Publish the model's text to the progress stream as it is written (on unless False)"
    )
    budget_cost_usd: float | None = Field(
        default=None,
        description="Cost ceiling of the whole session tree (every model call of it and its descendants)",
        **limit(minimum=0, maximum=1e6),
    )
    budget_tokens: int | None = Field(
        default=None,
        description="Token ceiling (input + output) of the whole session tree",
        **limit(minimum=0, maximum=10**12),
    )
    approval: ApprovalPolicy | None = Field(
        default=None, description="Tools that need a person's approval (added to the agent's own policy)"
    )

    @model_serializer(mode="wrap")
    def _only_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {k: v for k, v in data.items() if v is not None}

    def merged(self, other: SessionOptions | dict[str, Any] | None) -> SessionOptions:
        """These options with ``other``'s set ones on top."""
        if not other:
            return self
        top = other if isinstance(other, SessionOptions) else SessionOptions.model_validate(other)
        return SessionOptions.model_validate({**self.model_dump(), **top.model_dump()})

    def delegation_only(self) -> SessionOptions:
        """What a child inherits: the delegation limits, the budget of its tree and whether titles may
        come from prompts."""
        return SessionOptions.model_validate(
            {
                k: v
                for k, v in self.model_dump().items()
                if k.startswith(("delegation_", "budget_")) or k == "prompt_titles"
            }
        )


class SessionRequest(BaseModel):
    """What a client (or a parent session) asks for when starting a session."""

    # As in SessionOptions: a non-finite number stays one when dumped, for the limits' check to refuse.
    model_config = ConfigDict(ser_json_inf_nan="constants")

    agent: str = Field(default="assistant", **limit(chars=SCOPE_CHARS))
    prompt: str | None = Field(default=None, **limit(chars=MESSAGE_CHARS))
    organisation: str = Field(default="default", **limit(chars=SCOPE_CHARS))
    project: str = Field(default="default", **limit(chars=SCOPE_CHARS))
    user: str = Field(default="default", **limit(chars=ID_CHARS))
    title: str | None = Field(default=None, **limit(chars=LABEL_CHARS))
    model: str | None = Field(default=None, **limit(chars=LABEL_CHARS))
    tools: list[Annotated[str, Field(**limit(chars=LABEL_CHARS))]] | None = Field(default=None, **limit(items=500))
    exclude_tools: list[Annotated[str, Field(**limit(chars=LABEL_CHARS))]] = Field(
        default_factory=list, **limit(items=500)
    )
    system_prompt: str | None = Field(default=None, **limit(chars=MESSAGE_CHARS))
    max_steps: int | None = Field(default=None, ge=1, le=500)
    max_tokens: int | None = Field(default=None, ge=1, **limit(maximum=1_000_000))
    # A session that ends when it has nothing left to do (no message, loop, goal or child pending).
    # Chat sessions keep_alive and wait for the next message instead.
    keep_alive: bool = False
    # Tree links, filled by a parent session.
    parent_id: str | None = Field(default=None, **limit(chars=ID_CHARS))
    root_id: str | None = Field(default=None, **limit(chars=ID_CHARS))
    depth: int = Field(default=0, ge=0, **limit(maximum=100))
    chain: list[Annotated[str, Field(**limit(chars=LABEL_CHARS))]] = Field(default_factory=list, **limit(items=100))
    role: str | None = Field(default=None, **limit(chars=LABEL_CHARS))
    # Messages that open the conversation before the prompt (hand-off, prior_messages).
    history: list[Message] = Field(default_factory=list, **limit(items=1000))
    options: SessionOptions = Field(default_factory=SessionOptions)
    # Structured results: the final answer must be JSON matching this JSON Schema (checked by prepare_session).
    output_schema: dict[str, Any] | None = None
    # Invalid final answers sent back to the model, per turn, before the turn fails (default 2).
    output_retries: int | None = Field(default=None, **limit(minimum=0, maximum=MAX_OUTPUT_RETRIES))


class SessionConfig(BaseModel):
    """A request resolved against agents, catalog and settings by the ``prepare_session`` activity."""

    session_id: str
    agent: str
    organisation: str
    project: str
    user: str
    title: str
    model: str
    tools: list[str]
    max_steps: int
    max_tokens: int | None = None
    keep_alive: bool = False
    parent_id: str | None = None
    root_id: str
    depth: int = 0
    chain: list[str] = Field(default_factory=list)
    role: str | None = None
    spill_threshold: int = 2000
    subagents: list[str] = Field(default_factory=list)
    options: SessionOptions = Field(default_factory=SessionOptions)
    # Timeouts and retries of this session's calls (the worker's settings and the agent's overrides).
    policy: ExecutionPolicy = Field(default_factory=ExecutionPolicy)
    # What the final answer must be (structured results); None: free text.
    output: OutputContract | None = None
    # The title visibility shows (SessionTitle), when it is not ``title`` (see SessionOptions.prompt_titles).
    visible_title: str | None = None
    # The tools whose calls wait for a person's approval (None: none do); see contracts/_approvals.py.
    approvals: ResolvedApprovals | None = None

    def scoped_request(self, agent: str, prompt: str, **fields: Any) -> SessionRequest:
        """A request for another session in this one's organisation, project and user scope."""
        return SessionRequest(
            agent=agent, prompt=prompt, organisation=self.organisation, project=self.project, user=self.user, **fields
        )

    def child_request(self, agent: str, prompt: str, **fields: Any) -> SessionRequest:
        """A request for a child session: this scope, and the tree links (parent, root, depth, chain)."""
        return self.scoped_request(
            agent,
            prompt,
            parent_id=self.session_id,
            root_id=self.root_id,
            depth=self.depth + 1,
            chain=[*self.chain, agent],
            options=self.options.delegation_only(),
            **fields,
        )


class ParkedCall(BaseModel):
    """One tool call of a parked step that was still waiting when the run continued-as-new."""

    index: int
    kind: Literal["askUser", "wait_for_event", "subagent", "approval"]
    # The wait's own record in the state: the askUser ask id, the event subscription id, the child's id,
    # the approval id (the call waits for a person's approval; once approved it runs in the new run).
    ref: str
    # When the wait gives up, if the wait itself does not record it (invoke_sub_agent's bounded wait).
    deadline: datetime | None = None


class ParkedStep(BaseModel):
    """A model step whose tool calls were waiting (askUser, wait_for_event, a sub-agent, an approval) when the run
    continued-as-new: the new run resumes these waits and the turn goes on from this step."""

    trigger: Trigger
    # Steps of the turn already taken, this one included (the turn's step budget goes on from here).
    step: int
    # The assistant message whose tool calls these are (already in the transcript).
    message: Message
    # One entry per tool call: its result when it was already in, else None (then a ParkedCall says why).
    results: list[ToolCallOutput | None]
    waits: list[ParkedCall]
    last_answer: str | None = None


class SessionState(BaseModel):
    """All state of one session run; continue-as-new carries it whole."""

    status: SessionStatus = SessionStatus.starting
    transcript_len: int = 0
    inbox: list[Trigger] = Field(default_factory=list)
    turns: int = 0
    steps: int = 0
    usage: Usage = Field(default_factory=Usage)
    # Usage of descendant sessions, reported up the tree.
    tree_usage: Usage = Field(default_factory=Usage)
    last_message: Message | None = None
    last_message_id: str | None = None
    last_message_at: str | None = None
    # The message that opened the running turn (a user message, a notification), until the model answers:
    # getSubAgentMessage reports the latest message whatever its role (RTC), not only the last answer.
    last_input: LatestMessageView | None = None
    created_at: str | None = None
    updated_at: str | None = None
    error: str | None = None
    # Tool results a turn could not send before its step budget ended; the next model step sends them first.
    unsent: list[Message] = Field(default_factory=list)
    handed_off_to: str | None = None
    planning: PlanningState = Field(default_factory=PlanningState)
    human: HumanState = Field(default_factory=HumanState)
    delegation: DelegationState = Field(default_factory=DelegationState)
    events: EventWaitState = Field(default_factory=EventWaitState)
    # The latest workflow-native tool calls, one line each, for the Temporal UI's current details (native
    # tools run no activity, so the event history has no trace of them).
    native_calls: list[str] = Field(default_factory=list)
    # The structured result (sessions with an output schema).
    output: OutputState = Field(default_factory=OutputState)
    # The tree's spend against its budget (sessions with one).
    budget: BudgetState = Field(default_factory=BudgetState)
    approvals: ApprovalState = Field(default_factory=ApprovalState)
    # The step a run continued-as-new in the middle of; the next run resumes it.
    parked: ParkedStep | None = None


class SessionInput(BaseModel):
    """Workflow input: a request on first start; config and state after continue-as-new."""

    request: SessionRequest
    config: SessionConfig | None = None
    state: SessionState | None = None
    stream_state: Any | None = None


class PrepareInput(BaseModel):
    """Input of the ``prepare_session`` activity."""

    session_id: str
    request: SessionRequest
    # The first run id of the workflow's run chain, which owns the session's stored rows (None in histories
    # recorded before it was sent: those runs are not checked).
    run_chain: str | None = None


class PrepareOutput(BaseModel):
    config: SessionConfig
    transcript_len: int
