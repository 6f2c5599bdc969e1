"""The scripted model's script: conversations of model turns, read from YAML or JSON (see :mod:`agent_tools.testing`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field

from agent_tools._messages import Message, ToolCall

SCRIPT_FINISHED = "(script finished)"
"""What the scripted model answers once its conversation has run out of turns."""


class ScriptedCall(BaseModel):
    """A tool call the model makes in a turn; ``raw_arguments`` sends arguments exactly as written."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None


class ScriptedTurn(BaseModel):
    """One model turn: the text it streams (``say``, placeholders filled) and the tool calls it makes."""

    say: str = ""
    tool_calls: list[ScriptedCall] = Field(default_factory=list)
    # Optional HTTP-like failure for provider error tests: {"status": 429} etc. handled by the provider.
    fail: dict[str, Any] | None = None
    delay_seconds: float = 0.0
    # Stream ``say`` word by word, this long between words (None: the script's ``word_seconds``).
    word_seconds: float | None = None


class ScriptMatch(BaseModel):
    """Which sessions a conversation plays for: every field given must fit (none given: every session)."""

    agent: str | None = None
    prompt_contains: str | None = None
    title: str | None = None
    role: str | None = None


class Conversation(BaseModel):
    """The turns played, in order, for the sessions its ``match`` fits."""

    match: ScriptMatch = Field(default_factory=ScriptMatch)
    turns: list[ScriptedTurn] = Field(default_factory=list)
    # Repeat the last turn forever instead of finishing (long benchmark sessions).
    repeat_last: bool = False


class Script(BaseModel):
    """A whole script: the first conversation whose ``match`` fits a session plays for it."""

    conversations: list[Conversation]
    # The pace at which every turn streams its words unless the turn sets its own (0: all at once).
    word_seconds: float = 0.0

    @classmethod
    def load(cls, path: str | Path) -> Script:
        """Read a YAML (``.yaml``, ``.yml``) or JSON script; a bare list is the turns of one conversation."""
        text = Path(path).read_text()
        data = yaml.safe_load(text) if str(path).endswith((".yaml", ".yml")) else json.loads(text)
        if isinstance(data, list):
            data = {"conversations": [{"turns": data}]}
        return cls.model_validate(data)

    def choose(self, messages: list[Message], meta: dict[str, Any]) -> Conversation | None:
        """The first conversation whose ``match`` fits the session (``meta``: agent, title, role), if any."""
        first_user = next((m.content for m in messages if m.role == "user"), "")
        for conv in self.conversations:
            m = conv.match
            if m.agent and m.agent != meta.get("agent"):
                continue
            if m.title and m.title != meta.get("title"):
                continue
            if m.role and m.role != meta.get("role"):
                continue
            if m.prompt_contains and m.prompt_contains not in first_user:
                continue
            return conv
        return None

    def next_turn(self, messages: list[Message], meta: dict[str, Any]) -> tuple[ScriptedTurn | None, Message]:
        """The scripted turn for this transcript, and the assistant message it renders to."""
        conv = self.choose(messages, meta)
        index = int(meta.get("assistant_count", sum(1 for m in messages if m.role == "assistant")))
        if conv is None or (index >= len(conv.turns) and not (conv.repeat_last and conv.turns)):
            return None, Message(role="assistant", content=SCRIPT_FINISHED)
        turn = conv.turns[min(index, len(conv.turns) - 1)]
        calls = [
            ToolCall(
                id=f"call_{index}_{i}",
                name=c.name,
                arguments=_fill_obj(c.arguments, messages),
                raw_arguments=c.raw_arguments,
            )
            for i, c in enumerate(turn.tool_calls)
        ]
        return turn, Message(role="assistant", content=_fill(turn.say, messages), tool_calls=calls)


def _placeholders(messages: list[Message]) -> dict[str, str]:
    last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
    last_tool = next((m.content for m in reversed(messages) if m.role == "tool"), "")
    results: list[str] = []
    for m in reversed(messages):
        if m.role == "tool":
            results.append(m.content)
        elif m.role == "assistant":
            break
    return {
        "{{last_user}}": last_user,
        "{{last_tool}}": last_tool,
        "{{tool_results}}": "\n".join(reversed(results)),
    }


_NAMED = re.compile(r"\{\{tool_results:([A-Za-z0-9_\-]+)(?:\.([A-Za-z0-9_]+))?\}\}")


def _named_results(messages: list[Message], name: str, field: str | None = None) -> str:
    """Results of the latest step that called ``name``, in call order.

    With ``field``, that key of each JSON result.
    """
    found: list[str] = []
    for m in reversed(messages):
        if m.role == "tool" and m.name == name:
            found.append(_field(m.content, field) if field else m.content)
        elif m.role == "assistant" and found:
            break
    return "\n".join(reversed(found))


def _field(content: str, field: str) -> str:
    try:
        value = json.loads(content).get(field, "")
    except (ValueError, AttributeError):
        return content
    return value if isinstance(value, str) else json.dumps(value)


def _fill(text: str, messages: list[Message]) -> str:
    if "{{" not in text:
        return text
    text = _NAMED.sub(lambda m: _named_results(messages, m.group(1), m.group(2)), text)
    for key, value in _placeholders(messages).items():
        text = text.replace(key, value)
    return text


def _fill_obj(obj: Any, messages: list[Message]) -> Any:
    if isinstance(obj, str):
        return _fill(obj, messages)
    if isinstance(obj, list):
        return [_fill_obj(v, messages) for v in obj]
    if isinstance(obj, dict):
        return {k: _fill_obj(v, messages) for k, v in obj.items()}
    return obj


def words(text: str) -> list[str]:
    """``text`` in the pieces the scripted model streams: each word with the whitespace after it."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def script_spec(path: str | Path) -> str:
    """Model spec string for a script file."""
    return f"scripted:{Path(path).resolve()}"


def write_script(path: str | Path, conversations: list[dict[str, Any]] | list[ScriptedTurn | dict[str, Any]]) -> str:
    """Write a script (a list of conversations, or of turns for a single conversation); return its spec."""
    items = list(conversations)
    if items and not (isinstance(items[0], dict) and "turns" in items[0]):
        data: dict[str, Any] = {
            "conversations": [{"turns": [t.model_dump() if isinstance(t, BaseModel) else t for t in items]}]
        }
    else:
        data = {"conversations": items}
    Path(path).write_text(json.dumps(data))
    return script_spec(path)
