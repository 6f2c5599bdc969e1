"""The bare loop's own data: its messages and its scripted model, built from pydantic and the standard
library only (a reference imports nothing of ours). A module of its own, passed through the workflow
sandbox as a careful user's shared models are, so the sandbox does not rebuild them on every run."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field

SCRIPT_FINISHED = "(script finished)"


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class BareInput(BaseModel):
    prompt: str
    script: str
    max_steps: int


class BareLlmInput(BaseModel):
    script: str
    messages: list[Message]


class BareToolInput(BaseModel):
    topic: str


@lru_cache(maxsize=64)
def _turns(path: str, mtime: float) -> list[dict[str, Any]]:
    data = json.loads(open(path).read())
    turns: list[dict[str, Any]] = data["conversations"][0]["turns"]
    return turns


def scripted_reply(script: str, messages: list[Message]) -> Message:
    """The script's semantics: the n-th assistant step plays turn n (its ``say`` and its tool calls, ids
    ``call_<n>_<i>``); past the last turn the model answers ``(script finished)``."""
    turns = _turns(script, os.stat(script).st_mtime)  # stat per call, as the engine's provider does
    index = sum(1 for m in messages if m.role == "assistant")
    if index >= len(turns):
        return Message(role="assistant", content=SCRIPT_FINISHED)
    turn = turns[index]
    calls = [
        ToolCall(id=f"call_{index}_{i}", name=c["name"], arguments=dict(c.get("arguments", {})))
        for i, c in enumerate(turn.get("tool_calls", []))
    ]
    return Message(role="assistant", content=str(turn.get("say", "")), tool_calls=calls)
