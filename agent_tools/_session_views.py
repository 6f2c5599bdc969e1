"""The session models a client reads and sends: status views, results and the messages a session takes.

Apart from :mod:`agent_tools._session` (the state a session carries) so that a client that only reads or
messages sessions loads none of the state's models. Durable contracts: add optional fields only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_tools._boundaries import MESSAGE_CHARS, NOTE_CHARS, limit
from agent_tools._messages import Usage

__all__ = [
    "TERMINAL_STATUSES",
    "WORKFLOW_NAME",
    "LatestMessageView",
    "SendMessage",
    "SendMessageAccepted",
    "SessionResult",
    "SessionStatus",
    "StatusView",
    "StopRequest",
    "TriggerKind",
]

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


class LatestMessageView(BaseModel):
    message_id: str | None
    role: str | None
    content: str
    created_at: str | None


class SessionResult(BaseModel):
    session_id: str
    status: SessionStatus
    final_message: str | None = None
    usage: Usage = Field(default_factory=Usage)
    tree_usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    handed_off_to: str | None = None
    # The last final answer that matched the output schema, parsed (sessions with one; else None).
    output: Any = None


# ---- messages in ---------------------------------------------------------------------------------------


class SendMessage(BaseModel):
    content: str = Field(min_length=1, **limit(chars=MESSAGE_CHARS))
    # Clients send "user" messages; the other kinds are the session's own (a refusal says so).
    kind: TriggerKind = "user"
    meta: dict[str, Any] = Field(default_factory=dict, **limit(properties=20))


class SendMessageAccepted(BaseModel):
    position: int
    queued_behind: int


class StopRequest(BaseModel):
    # A stop is never refused: a longer reason is cut (the session stops with at most NOTE_CHARS of it).
    reason: str = Field(default="stopped by request", **limit(chars=NOTE_CHARS))


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
