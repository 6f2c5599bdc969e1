"""Planning contracts (RTC): todoWrite, goals (createGoal/completeGoal/cancelGoal) and loops
(createLoop/cancelLoop/completeLoop/listLoops/pauseLoop/resumeLoop), their state and pure rules.

Everything here is pure: the session workflow (``agent_tools/workflows/_planning.py``) keeps this state and runs the
timers; the goal judge activity (``agent_tools/activities/_planning.py``) builds its prompt and parses its verdict here.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, Field

from agent_tools._boundaries import ID_CHARS, LABEL_CHARS, LIST_ITEMS, NOTE_CHARS, limit
from agent_tools._budget import TreeBudget
from agent_tools._catalog.spec import ToolSpec
from agent_tools._messages import Message, Usage

TodoStatus = Literal["pending", "in_progress", "completed"]
GoalStatus = Literal["active", "completed", "cancelled", "exhausted"]
LoopStatus = Literal["active", "paused", "completed", "cancelled", "exhausted"]

ACTIVITY_JUDGE_GOAL = "agent_tools.planning.judge_goal"

# Bounds (documented in docs/human-and-planning.md).
DEFAULT_GOAL_TURNS = 50
MAX_GOAL_TURNS = 200
MIN_LOOP_INTERVAL_SECONDS = 1
"""The schema's bound: RTC sets no minimum interval, only a positive number makes sense."""
DEFAULT_LOOP_FLOOR_SECONDS = 5
"""Cost control: the shortest interval a loop may have unless ``options.loop_min_interval_seconds`` says
otherwise (a tick is a model turn; a loop every second would spend tokens for nothing)."""
MAX_LOOP_INTERVAL_SECONDS = 30 * 24 * 3600
DEFAULT_LOOP_TURNS = 10
MAX_LOOP_TURNS = 1000
# A loop expires when it could not get its turns in within this many times its nominal span (paused time
# excluded): ticks that coalesce behind long turns must not keep a loop alive forever.
LOOP_EXPIRY_FACTOR = 2
# Finished goals and loops kept in the state (continue-as-new carries it, so it is bounded).
MAX_FINISHED_KEPT = 20


# ---- todos -------------------------------------------------------------------------------------------


class TodoItem(BaseModel):
    content: str = Field(min_length=1, description="Task description (imperative)", **limit(chars=NOTE_CHARS))
    status: TodoStatus = Field(description="Task status")
    active_form: str | None = Field(
        default=None,
        description="Short description for status bar display when in progress",
        **limit(chars=LABEL_CHARS),
    )


class TodoWriteArgs(BaseModel):
    """Full replacement: each call passes the complete list."""

    todos: list[TodoItem] = Field(
        default_factory=list,
        description=f"Todo item list (complete replacement; at most {LIST_ITEMS} items)",
        **limit(items=LIST_ITEMS),
    )


def in_progress_hint(todos: list[TodoItem]) -> str:
    """A hint (never a refusal: RTC sets no limit) when several items are in progress at once."""
    active = [t.content for t in todos if t.status == "in_progress"]
    if len(active) < 2:
        return ""
    names = ", ".join(repr(a[:60]) for a in active[:5]) + (", ..." if len(active) > 5 else "")
    return (
        f"\nNote: {len(active)} items are in_progress ({names}); the status bar is clearest with one at a "
        "time, so mark the others pending or completed when you are not working on them."
    )


def render_todos(todos: list[TodoItem]) -> str:
    """Markdown checklist for the Temporal UI and the CLI."""
    marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
    lines = []
    for t in todos:
        label = t.active_form if t.status == "in_progress" and t.active_form else t.content
        lines.append(f"- {marks[t.status]} {label}")
    return "\n".join(lines)


# ---- goals -------------------------------------------------------------------------------------------


class CreateGoalArgs(BaseModel):
    condition: str = Field(min_length=1, max_length=4000, description="Description of the goal completion condition")
    max_turns: int = Field(
        default=DEFAULT_GOAL_TURNS,
        ge=1,
        le=MAX_GOAL_TURNS,
        description=f"Maximum turn limit (default {DEFAULT_GOAL_TURNS}, at most {MAX_GOAL_TURNS})",
    )


class GoalIdArgs(BaseModel):
    goal_id: str = Field(min_length=1, description="Goal ID", **limit(chars=ID_CHARS))


class CompleteGoalArgs(GoalIdArgs):
    reason: str | None = Field(
        default=None, description="Optional: why the goal counts as met", **limit(chars=NOTE_CHARS)
    )


class TrackedItem(BaseModel):
    """What goals and loops share: an id, a status that ends, and the reason it ended.

    The session finds, refuses and finishes both the same way (``PlanningPart._live_item`` and
    ``_finish_item``); each kind names its id field, its live statuses and the trigger kind its turns have.
    """

    KIND: ClassVar[str]
    LIVE: ClassVar[tuple[str, ...]]
    TRIGGER: ClassVar[str]

    created_at: str
    updated_at: str
    reason: str | None = None

    @property
    def item_id(self) -> str:
        raise NotImplementedError

    @property
    def live(self) -> bool:
        return str(getattr(self, "status", "")) in self.LIVE


class Goal(TrackedItem):
    KIND: ClassVar[str] = "goal"
    LIVE: ClassVar[tuple[str, ...]] = ("active",)
    TRIGGER: ClassVar[str] = "goal"

    goal_id: str
    condition: str
    max_turns: int
    completed_turns: int = 0
    status: GoalStatus = "active"
    # The last judgement (or the reason given by completeGoal / cancelGoal / exhaustion): ``reason``.
    judgements: int = 0

    @property
    def item_id(self) -> str:
        return self.goal_id


class JudgeGoalInput(BaseModel):
    """Input of the goal judge activity."""

    # Plain fields, not SessionRef: agent_tools._session imports this module, activity_io imports that one.
    session_id: str
    root_id: str
    agent: str
    goal_id: str
    condition: str
    completed_turns: int
    max_turns: int
    # Transcript length after the turn: the judge reads the turn's messages from the store up to here.
    position: int
    # Earlier judgements of this goal (the scripted model picks its reply by it; real models ignore it).
    judgements: int = 0
    # The session tree's ceilings: the judge's call is refused like any other once they are reached.
    budget: TreeBudget | None = None


class GoalVerdict(BaseModel):
    """The judge's answer: ``{"met": bool, "reason": str}``."""

    met: bool
    reason: str = ""
    usage: Usage | None = None


JUDGE_SYSTEM_PROMPT = (
    "You judge whether an autonomous agent has met its goal. You get the goal's completion condition and "
    "the agent's latest work. Answer with one JSON object and nothing else: "
    '{"met": true|false, "reason": "<one sentence>"}. Say met only when the condition is clearly satisfied '
    "by what the agent did or reported; otherwise say what is missing."
)
# How much of the latest work the judge reads.
JUDGE_EVIDENCE_CHARS = 12000


def judge_messages(condition: str, transcript: list[Message], *, completed_turns: int, max_turns: int) -> list[Message]:
    """The judge's prompt: the condition and the newest messages (back to the last user message)."""
    tail: list[Message] = []
    used = 0
    for m in reversed([m for m in transcript if m.role != "system"]):
        text = m.content or ""
        if m.tool_calls:
            text += "\n" + "\n".join(f"[calls {c.name} {json.dumps(c.arguments)[:300]}]" for c in m.tool_calls)
        if used + len(text) > JUDGE_EVIDENCE_CHARS and tail:
            break
        tail.append(Message(role=m.role, content=text[:JUDGE_EVIDENCE_CHARS]))
        used += len(text)
        if m.role == "user":
            break
    tail.reverse()
    evidence = "\n\n".join(f"[{m.role}] {m.content}" for m in tail) or "(no messages)"
    user = (
        f"Goal condition: {condition}\n"
        f"Turns used: {completed_turns} of {max_turns}.\n\n"
        f"The agent's latest turn:\n{evidence}\n\n"
        'Is the condition met? Reply with {"met": true|false, "reason": "..."} only.'
    )
    return [Message(role="system", content=JUDGE_SYSTEM_PROMPT), Message(role="user", content=user)]


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_verdict(text: str) -> GoalVerdict:
    """The verdict in a judge reply; a reply that is not a verdict counts as *not met* (and says so)."""
    match = _JSON_OBJECT.search(text or "")
    if match:
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("met"), bool):
            return GoalVerdict(met=data["met"], reason=str(data.get("reason") or ""))
    return GoalVerdict(met=False, reason=f"the judge's reply was not a verdict: {(text or '')[:200]!r}")


# ---- loops -------------------------------------------------------------------------------------------


def loop_schema_floor(floor: float) -> int:
    """The smallest whole ``interval_seconds`` that ``floor`` allows (what createLoop's schema states)."""
    return max(MIN_LOOP_INTERVAL_SECONDS, math.ceil(floor))


def session_schema(schema: dict[str, Any], minimums: dict[str, int]) -> dict[str, Any]:
    """``schema`` with the session's own minimums on its top-level fields (a raised floor, never lowered)."""
    if not minimums:
        return schema
    props = dict(schema.get("properties", {}))
    for name, minimum in minimums.items():
        if isinstance(props.get(name), dict):
            props[name] = {**props[name], "minimum": max(minimum, props[name].get("minimum", minimum))}
    return {**schema, "properties": props}


def loop_interval_refusal(interval_seconds: int, floor: float) -> str | None:
    """Why a loop of ``interval_seconds`` may not be created under ``floor``, or None."""
    if interval_seconds < floor:
        return (
            f"interval_seconds must be at least {floor:g} here (the deployment's shortest loop interval, to keep "
            f"loop turns from spending tokens for nothing); got {interval_seconds}."
        )
    return None


class CreateLoopArgs(BaseModel):
    prompt: str = Field(min_length=1, max_length=8000, description="Prompt to execute on each cycle")
    interval_seconds: int = Field(
        ge=MIN_LOOP_INTERVAL_SECONDS,
        le=MAX_LOOP_INTERVAL_SECONDS,
        description="Execution interval (seconds; at most 30 days, and at least the minimum stated here)",
    )
    max_turns: int = Field(
        default=DEFAULT_LOOP_TURNS,
        ge=1,
        le=MAX_LOOP_TURNS,
        description=f"Maximum executions (default {DEFAULT_LOOP_TURNS}, at most {MAX_LOOP_TURNS})",
    )


class LoopIdArgs(BaseModel):
    loop_id: str = Field(min_length=1, description="Loop ID", **limit(chars=ID_CHARS))


class CompleteLoopArgs(BaseModel):
    reason: str = Field(min_length=1, description="Why the loop is complete", **limit(chars=NOTE_CHARS))
    loop_id: str | None = Field(
        default=None,
        description="Loop ID; defaults to the loop whose turn is running (or the only loop)",
        **limit(chars=ID_CHARS),
    )


class ListLoopsArgs(BaseModel):
    pass


class Loop(TrackedItem):
    KIND: ClassVar[str] = "loop"
    LIVE: ClassVar[tuple[str, ...]] = ("active", "paused")
    TRIGGER: ClassVar[str] = "loop"

    loop_id: str
    prompt: str
    interval_seconds: int
    max_turns: int
    completed_turns: int = 0
    status: LoopStatus = "active"
    # When the next tick fires (active loops only).
    next_run_at: str | None = None
    last_run_at: str | None = None
    expires_at: str | None = None
    paused_at: str | None = None
    # A tick is queued or its turn is running; further ticks coalesce into it.
    tick_pending: bool = False
    ticks: int = 0
    coalesced_ticks: int = 0

    @property
    def item_id(self) -> str:
        return self.loop_id


class PlanningState(BaseModel):
    todos: list[TodoItem] = Field(default_factory=list)
    goals: list[Goal] = Field(default_factory=list)
    loops: list[Loop] = Field(default_factory=list)
    # Sequence numbers for short, readable ids (goal-1, loop-1).
    next_goal: int = 1
    next_loop: int = 1

    def active_goal(self) -> Goal | None:
        return next((g for g in self.goals if g.status == "active"), None)

    def goal(self, goal_id: str) -> Goal | None:
        return next((g for g in self.goals if g.goal_id == goal_id.strip()), None)

    def loop(self, loop_id: str) -> Loop | None:
        return next((lp for lp in self.loops if lp.loop_id == loop_id.strip()), None)

    def live_loops(self) -> list[Loop]:
        return [lp for lp in self.loops if lp.live]

    def prune(self) -> None:
        """Drop the oldest finished goals and loops beyond :data:`MAX_FINISHED_KEPT`."""
        self.goals = _pruned(self.goals)
        self.loops = _pruned(self.loops)


T = TypeVar("T", bound=TrackedItem)


def _pruned(items: list[T]) -> list[T]:
    finished = [x for x in items if not x.live]
    drop = {id(x) for x in finished[: max(0, len(finished) - MAX_FINISHED_KEPT)]}
    return [x for x in items if id(x) not in drop]


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def loop_expiry(created: datetime, interval_seconds: int, max_turns: int) -> datetime:
    return created + timedelta(seconds=interval_seconds * max_turns * LOOP_EXPIRY_FACTOR)


def next_after(scheduled: datetime, now: datetime, interval_seconds: int) -> datetime:
    """The first tick of the schedule strictly after ``now``: missed ticks coalesce, the phase is kept."""
    step = timedelta(seconds=interval_seconds)
    if scheduled > now:
        return scheduled
    missed = int((now - scheduled) / step) + 1
    return scheduled + missed * step


def render_goals(goals: list[Goal]) -> str:
    lines = []
    for g in goals:
        reason = f": {g.reason}" if g.reason else ""
        lines.append(f"- `{g.goal_id}` **{g.status}** {g.completed_turns}/{g.max_turns} turns: {g.condition}{reason}")
    return "\n".join(lines)


def render_loops(loops: list[Loop]) -> str:
    lines = []
    for lp in loops:
        nxt = f", next {lp.next_run_at}" if lp.status == "active" and lp.next_run_at else ""
        lines.append(
            f"- `{lp.loop_id}` **{lp.status}** every {lp.interval_seconds}s, "
            f"{lp.completed_turns}/{lp.max_turns} turns{nxt}: {lp.prompt[:120]}"
        )
    return "\n".join(lines)


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="todoWrite",
        description=(
            "Manage your task list. Full replacement: pass the complete list every time. Keep tasks at a "
            "verifiable granularity, mark completed tasks completed and in-progress ones in_progress promptly, "
            "and remove tasks you no longer need instead of cancelling them."
        ),
        args_model=TodoWriteArgs,
        capability="planning",
        runs_in="workflow",
    ),
    ToolSpec(
        name="createGoal",
        description=(
            "Create an autonomous goal: after every turn the goal is checked and, while it is not met, "
            "another turn is started automatically, up to max_turns (default 50). One goal is active at a "
            "time. Call completeGoal when you have met it."
        ),
        args_model=CreateGoalArgs,
        capability="planning",
        runs_in="workflow",
        summary_arg="condition",
    ),
    ToolSpec(
        name="completeGoal",
        description="Mark the goal as completed.",
        args_model=CompleteGoalArgs,
        capability="planning",
        runs_in="workflow",
    ),
    ToolSpec(
        name="cancelGoal",
        description="Cancel the goal.",
        args_model=GoalIdArgs,
        capability="planning",
        runs_in="workflow",
    ),
    ToolSpec(
        name="createLoop",
        description=(
            "Create a scheduled loop: the prompt runs as a new turn every interval_seconds, up to max_turns "
            "times (default 10). Ticks that fall due while the session is busy coalesce into one turn; ticks "
            "never overlap. The deployment may set a shortest interval (a few seconds by default)."
        ),
        args_model=CreateLoopArgs,
        capability="planning",
        runs_in="workflow",
        summary_arg="prompt",
    ),
    ToolSpec(
        name="cancelLoop",
        description="Cancel a loop task.",
        args_model=LoopIdArgs,
        capability="planning",
        runs_in="workflow",
    ),
    ToolSpec(
        name="completeLoop",
        description="Mark a loop task as completed, with the reason (default: the loop now running).",
        args_model=CompleteLoopArgs,
        capability="planning",
        runs_in="workflow",
    ),
    ToolSpec(
        name="listLoops",
        read_only=True,
        description="List all loop tasks in the current session.",
        args_model=ListLoopsArgs,
        capability="planning",
        runs_in="workflow",
    ),
    ToolSpec(
        name="pauseLoop",
        description="Pause a loop task: no new turns until resumeLoop.",
        args_model=LoopIdArgs,
        capability="planning",
        runs_in="workflow",
    ),
    ToolSpec(
        name="resumeLoop",
        description="Resume a paused loop task; its next turn comes one interval from now.",
        args_model=LoopIdArgs,
        capability="planning",
        runs_in="workflow",
    ),
]
