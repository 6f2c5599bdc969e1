"""Test kit: the scripted model, a deterministic script of model turns.

A script is YAML or JSON::

    conversations:
      - match: {agent: researcher}          # optional; also prompt_contains, title, role
        turns:
          - say: "Let me plan."
            tool_calls:
              - name: todoWrite
                arguments: {todos: [{content: "Search", status: in_progress}]}
          - say: "Done: {{last_tool}}"

The model streams each turn's ``say`` word by word, ``word_seconds`` apart (per turn, or for the whole
script at its top level: ``{word_seconds: 0.05, conversations: [...]}``), so streamed text can be watched
and tested offline.

The conversation is chosen by the first ``match`` that fits (agent name, the first user message, the
session title or role); the turn is the number of assistant messages already in the transcript. Placeholders
``{{last_user}}``, ``{{last_tool}}``, ``{{tool_results}}`` (the last step's results) and
``{{tool_results:NAME}}`` (the results of the latest step that called NAME; ``{{tool_results:NAME.key}}``
takes one key of JSON results) are filled from the transcript. When a
conversation runs out of turns the model answers ``(script finished)``.

Use :func:`script_spec` to pass a script written in Python as a model spec.

:class:`FunctionModel` scripts a session in Python instead, without a file: a function of the messages
(and of what the step offers) returns the assistant's message, in the worker's process::

    def model(messages: list[Message], info: ModelInfo) -> Message | str:
        if info.step == 0:
            return Message(role="assistant", content="", tool_calls=[ToolCall(id="c1", name="lookup")])
        return "the answer"

    plugin = AgentToolsPlugin(settings, model_provider=FunctionModel(model))
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from agent_tools._messages import Message
from agent_tools._script import (
    SCRIPT_FINISHED,
    Conversation,
    Script,
    ScriptedCall,
    ScriptedTurn,
    ScriptMatch,
    script_spec,
    write_script,
)

if TYPE_CHECKING:
    from agent_tools.activities._providers.base import ModelRequest, ModelResponse, Provider, TextSink, ToolSchema
    from agent_tools.contracts._output import OutputContract

__all__ = [
    "SCRIPT_FINISHED",
    "Conversation",
    "FunctionDef",
    "FunctionModel",
    "ModelInfo",
    "Script",
    "ScriptMatch",
    "ScriptedCall",
    "ScriptedTurn",
    "script_spec",
    "write_script",
]


# ---- the function model --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """What a :class:`FunctionModel`'s function is told besides the messages of the step."""

    spec: str
    """The model spec the call was made for (``settings.model``, the agent's, a tier's)."""
    tools: list[ToolSchema]
    """The tools offered to this step (name, description, JSON schema of the arguments)."""
    step: int
    """The assistant messages already in the conversation (0 on a session's first step)."""
    max_tokens: int | None
    meta: dict[str, Any] = field(default_factory=dict)
    """Who asks: ``agent``, ``session_id``, ``title``, ``role``, ``attempt`` (the goal judge's agent is
    ``goal-judge``)."""
    output: OutputContract | None = None
    """The session's output contract, when the final answer must match a schema."""


FunctionDef: TypeAlias = Callable[[list[Message], ModelInfo], "Message | str | Awaitable[Message | str]"]
"""A plain or ``async`` function: the step's messages (system prompt first) and its :class:`ModelInfo` in,
the assistant's message out (a ``str`` is a final answer without tool calls)."""


class FunctionModel:
    """A model answered by a Python function in the worker's process, for every model call of the worker.

    Install it with ``AgentToolsPlugin(model_provider=FunctionModel(function))``: every spec the worker is
    asked for (the session's model, tiers, the goal judge's) goes to ``function``. It runs behind the model
    step activity, so a session driven by it is recorded in history like any other; the function itself is
    not replayed. An exception it raises fails the model step as a provider's would (and is retried).
    """

    name = "function"

    def __init__(self, function: FunctionDef) -> None:
        """Answer every model call of the worker with ``function``."""
        self.function = function

    def resolve(self, spec: str) -> tuple[Provider, str]:
        """This model for every spec, under the spec's own name."""
        return self, spec

    def check(self, spec: str) -> None:
        """Every spec is served."""

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelResponse:
        """Call the function with the step's messages and what the step offers; its message is the answer."""
        from agent_tools.activities._providers.base import estimated_response

        info = ModelInfo(
            spec=request.model,
            tools=list(request.tools),
            step=int(request.meta.get("assistant_count", sum(1 for m in request.messages if m.role == "assistant"))),
            max_tokens=request.max_tokens,
            meta=dict(request.meta),
            output=request.output,
        )
        answer = self.function(list(request.messages), info)
        if inspect.isawaitable(answer):
            answer = await answer
        message = Message(role="assistant", content=answer) if isinstance(answer, str) else answer
        if on_text is not None and message.content:
            on_text(message.content)
        return estimated_response(request, message)
