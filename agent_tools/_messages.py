"""Chat messages, tool calls and usage: the wire shapes shared by providers, store and workflows.

These models are durable contracts (they sit in workflow histories and in the transcript table):
only ever add optional fields.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """One function call requested by the model."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # Set when the provider sent arguments that are not a JSON object; the call then fails with a clear
    # tool error instead of a crash.
    raw_arguments: str | None = None
    # Why the arguments were not taken (too deep, too large: see agent_tools._boundaries); the session answers
    # the call with this as a tool error.
    refused: str | None = None


class Message(BaseModel):
    """One transcript entry, provider-neutral."""

    role: Role
    # The limit applies where messages enter from outside (a session request's history); transcripts are
    # bounded by the model and tool boundaries.
    content: str = Field(default="", json_schema_extra={"maxLength": 100_000})
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    # Reference of the full tool result when the model's copy was shortened (see results spilling).
    artifact_ref: str | None = None


def message_fingerprint(message: Message) -> str:
    """Short digest of a message: lets a worker check that its cached transcript holds the answer the
    workflow actually received (a retried model call may have replaced it)."""
    import hashlib

    digest = hashlib.sha1(message.content.encode())
    for call in message.tool_calls:
        digest.update(call.id.encode())
    return digest.hexdigest()[:12]


class Usage(BaseModel):
    """Token usage and cost, summed over calls."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 8),
        )
