"""Session models: what starts a session, the state it carries, and the messages it takes.

All workflow state is one model (:class:`SessionState`), which is exactly what continue-as-new carries.
Every signal, update and query takes one input model. These are durable contracts: add optional fields only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_tools.messages import Message, Usage
from agent_tools.policy import ExecutionPolicy
from agent_tools.tools.delegation import DelegationState
from agent_tools.tools.events import EventWaitState
from agent_tools.tools.human import HumanState
from agent_tools.tools.planning import PlanningState

WORKFLOW_NAME = "AgentSession"


class SessionStatus(StrEnum):
    starting = "starting"
    running = "running"
    waiting_for_user = "waiting_for_user"
    waiting_for_event = "waiting_for_event"
    idle = "idle"
    completed = "completed"
    stopped = "stopped"
    failed = "failed"
    handed_off = "handed_off"


TERMINAL_STATUSES = frozenset(
    {SessionStatus.completed, SessionStatus.stopped, SessionStatus.failed, SessionStatus.handed_off}
)

TriggerKind = Literal["user", "loop", "goal", "subagent", "event", "handoff", "system"]


class Trigger(BaseModel):
    """Something that starts a turn."""

    kind: TriggerKind = "user"
    content: str
    meta: dict[str, Any] = Field(default_factory=dict)


class SessionRequest(BaseModel):
    """What a client (or a parent session) asks for when starting a session."""

    agent: str = "assistant"
    prompt: str | None = None
    organisation: str = "default"
    project: str = "default"
    user: str = "default"
    title: str | None = None
    model: str | None = None
    tools: list[str] | None = None
    exclude_tools: list[str] = Field(default_factory=list)
    system_prompt: str | None = None
    max_steps: int | None = Field(default=None, ge=1, le=500)
    max_tokens: int | None = Field(default=None, ge=1)
    # A session that ends when it has nothing left to do (no message, loop, goal or child pending).
    # Chat sessions keep_alive and wait for the next message instead.
    keep_alive: bool = False
    # Tree links, filled by a parent session.
    parent_id: str | None = None
    root_id: str | None = None
    depth: int = Field(default=0, ge=0)
    chain: list[str] = Field(default_factory=list)
    role: str | None = None
    # Messages that open the conversation before the prompt (hand-off, prior_messages).
    history: list[Message] = Field(default_factory=list)
    options: dict[str, Any] = Field(default_factory=dict)


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
    options: dict[str, Any] = Field(default_factory=dict)
    # Timeouts and retries of this session's calls (the worker's settings and the agent's overrides).
    policy: ExecutionPolicy = Field(default_factory=ExecutionPolicy)


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


class SessionInput(BaseModel):
    """Workflow input: a request on first start; config and state after continue-as-new."""

    request: SessionRequest
    config: SessionConfig | None = None
    state: SessionState | None = None
    stream_state: Any | None = None


class SessionResult(BaseModel):
    session_id: str
    status: SessionStatus
    final_message: str | None = None
    usage: Usage = Field(default_factory=Usage)
    tree_usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    handed_off_to: str | None = None


class PrepareInput(BaseModel):
    """Input of the ``prepare_session`` activity."""

    session_id: str
    request: SessionRequest


class PrepareOutput(BaseModel):
    config: SessionConfig
    transcript_len: int


# ---- messages in ---------------------------------------------------------------------------------------


class SendMessage(BaseModel):
    content: str = Field(min_length=1)
    kind: TriggerKind = "user"
    meta: dict[str, Any] = Field(default_factory=dict)


class SendMessageAccepted(BaseModel):
    position: int
    queued_behind: int


class StopRequest(BaseModel):
    reason: str = "stopped by request"


class StatusView(BaseModel):
    session_id: str
    agent: str
    title: str
    status: SessionStatus
    turns: int
    steps: int
    usage: Usage
    tree_usage: Usage
    parent_id: str | None
    root_id: str
    depth: int
    pending_inbox: int
    created_at: str | None
    updated_at: str | None
    error: str | None = None
    # The session the conversation continues in after hand_off_to_agent.
    handed_off_to: str | None = None


class LatestMessageView(BaseModel):
    message_id: str | None
    role: str | None
    content: str
    created_at: str | None
