"""Inputs and results of the engine's activities, and the live progress events.

Durable contracts (they sit in histories): add optional fields only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from agent_tools._budget import TreeBudget
from agent_tools._messages import Message, Usage
from agent_tools.contracts._output import OutputContract, StructuredAnswer

if TYPE_CHECKING:
    # Only for a type hint: capability contract modules import this module and agent_tools._session imports
    # theirs, so a runtime import here would be circular.
    from agent_tools._session import SessionConfig

__all__ = [
    "ACTIVITY_LLM_STEP",
    "ACTIVITY_PREPARE",
    "RESULT_READERS",
    "TOOL_ACTIVITY_PREFIX",
    "LlmStepInput",
    "LlmStepOutput",
    "ProgressEvent",
    "SessionRef",
    "ToolCallInput",
    "ToolCallOutput",
    "tool_activity_name",
]

ACTIVITY_PREPARE = "agent_tools.prepare_session"
ACTIVITY_LLM_STEP = "agent_tools.llm_step"
TOOL_ACTIVITY_PREFIX = "tool:"


# Tools that read a saved (spilled) tool result: FYAI's three readers and codai's read_artifact.
RESULT_READERS: tuple[str, ...] = ("read_tool_result", "search_tool_result", "query_tool_result", "read_artifact")


def tool_activity_name(tool: str) -> str:
    """Stable activity type of a tool: the UI lists ``tool:webSearch`` etc."""
    return f"{TOOL_ACTIVITY_PREFIX}{tool}"


class SessionRef(BaseModel):
    """What an activity needs to know about the calling session; small on purpose."""

    session_id: str
    run_id: str
    agent: str
    organisation: str
    project: str
    user: str
    root_id: str
    parent_id: str | None = None
    depth: int = 0
    model: str
    spill_threshold: int = 2000
    # The agent has memory on (FYAI's Memory checkbox): memory tools and the Memory Context block.
    memory: bool = True
    # The result readers this agent has: a saved-result pointer names these, not another dialect's.
    readers: list[str] = Field(default_factory=list)
    # The tree's ceilings: a model call made for this session checks the tree's spend against them first.
    budget: TreeBudget | None = None
    # The session's turn when it called (None: a caller that does not say). A saved result's ref carries it:
    # FYAI's readers refuse a ref from an earlier turn ("told to call the tool again").
    turn: int | None = None

    @classmethod
    def of(cls, config: SessionConfig, run_id: str, turn: int | None = None) -> SessionRef:
        return cls(
            session_id=config.session_id,
            run_id=run_id,
            agent=config.agent,
            organisation=config.organisation,
            project=config.project,
            user=config.user,
            root_id=config.root_id,
            parent_id=config.parent_id,
            depth=config.depth,
            model=config.model,
            spill_threshold=config.spill_threshold,
            memory=config.options.memory is not False,
            readers=[t for t in config.tools if t in RESULT_READERS],
            budget=(
                TreeBudget(
                    root_id=config.root_id,
                    cost_usd=config.options.budget_cost_usd,
                    tokens=config.options.budget_tokens,
                )
                if config.options.budget_cost_usd is not None or config.options.budget_tokens is not None
                else None
            ),
            turn=turn,
        )


class LlmStepInput(BaseModel):
    """Only the new messages travel; the activity reads the rest of the transcript from the store."""

    session: SessionRef
    position: int
    new_messages: list[Message] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    model: str
    max_tokens: int | None = None
    title: str | None = None
    role: str | None = None
    # Fingerprint of the last model answer before ``position`` (see messages.message_fingerprint).
    last_answer: str | None = None
    # Publish the reply's text to the session's progress stream while it is generated (``text_delta``).
    stream: bool = False
    # The session's step counter for this call (names the step in progress events and traces).
    step: int | None = None
    # Structured results: the provider is asked for this schema and a final answer is checked against it.
    output: OutputContract | None = None
    # Lower bounds this session enforces above its tools' static schemas (tool -> field -> minimum), stated in
    # the schemas the model is sent: createLoop's interval floor is a session option.
    schema_minimums: dict[str, dict[str, int]] = Field(default_factory=dict)


class LlmStepOutput(BaseModel):
    message: Message
    position: int
    usage: Usage
    # A final answer's verdict when the step had an output contract.
    output: StructuredAnswer | None = None
    # The tree's spend after this step, from the store (sessions with a budget).
    tree_spent: Usage | None = None


class ToolCallInput(BaseModel):
    session: SessionRef
    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    # The approval this call runs under: the activity consumes its grant once (contracts/_approvals.py).
    approval_id: str | None = None


class ToolCallOutput(BaseModel):
    """What the model sees (``content``), plus what the workflow and people may want besides."""

    content: str
    is_error: bool = False
    artifact_ref: str | None = None
    usage: Usage | None = None
    # Structured form of the result for in-process callers (tests, the tool's own code). Never serialized:
    # the engine reads ``content`` only, so ``data`` would cost history bytes for nothing.
    data: dict[str, Any] | None = Field(default=None, exclude=True)


ProgressKind = Literal[
    "turn_started",
    "turn_finished",
    "assistant_message",
    "tool_started",
    "tool_finished",
    "todos",
    "question",
    "answer",
    "subagent_started",
    "subagent_done",
    "goal",
    "loop",
    "event",
    "status",
    # A model step began (the workflow): {step, position, model}.
    "step_started",
    # Text of a running model step (the llm_step activity, batched): {position, attempt, offset, text}.
    "text_delta",
    # A retried model step: drop the text earlier attempts of that step streamed: {position, attempt}.
    "text_discard",
    # A client's signal that could not be taken (signals cannot be refused to the sender).
    "input_rejected",
    # The session tree's budget is reached: {reason, spent}.
    "budget",
    # A tool call waits for a person's approval, or its approval was decided: {approval_id, tool, state, ...}.
    "approval",
]


class ProgressEvent(BaseModel):
    """One live progress item on the session's ``progress`` stream topic."""

    kind: ProgressKind
    session_id: str
    data: dict[str, Any] = Field(default_factory=dict)
