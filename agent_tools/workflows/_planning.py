"""Planning tools inside the session: todoWrite, goals and loops.

- Goals: after every turn the active goal counts the turn and is judged (unless the agent completed it);
  the judge is an activity on the small model tier. An unmet goal with turns left queues a continuation
  turn; at ``max_turns`` it is exhausted and the session queues a turn that tells the user.
- Loops: one background scheduler task per run keeps a durable timer for the earliest due loop and puts a
  tick in the inbox; the session's main loop runs it as a turn when no other turn is running, so ticks
  never overlap. All loop state (next run time, counters, pending tick) lives in ``SessionState``, so it
  survives continue-as-new and worker restarts; the new run's scheduler picks up where the old one was.
"""

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from temporalio.exceptions import ActivityError

from agent_tools._activity_io import ToolCallOutput
from agent_tools._messages import ToolCall
from agent_tools._session import Trigger
from agent_tools._session_names import QUERY_GOALS, QUERY_LOOPS, QUERY_PLANNING_STATE, QUERY_TODOS
from agent_tools.contracts._planning import (
    ACTIVITY_JUDGE_GOAL,
    DEFAULT_LOOP_FLOOR_SECONDS,
    CompleteGoalArgs,
    CompleteLoopArgs,
    CreateGoalArgs,
    CreateLoopArgs,
    Goal,
    GoalIdArgs,
    GoalVerdict,
    JudgeGoalInput,
    ListLoopsArgs,
    Loop,
    LoopIdArgs,
    PlanningState,
    TodoItem,
    TodoWriteArgs,
    TrackedItem,
    in_progress_hint,
    loop_expiry,
    loop_interval_refusal,
    loop_schema_floor,
    next_after,
    parse_time,
    render_goals,
    render_loops,
    render_todos,
)
from agent_tools.workflows._base import MODEL_NON_RETRYABLE, call_options, failure_detail, tool_error
from agent_tools.workflows._native import NativeHandler
from agent_tools.workflows._port import CapabilityPart, SessionPort, query

T = TypeVar("T", bound=TrackedItem)


class PlanningPart(CapabilityPart):
    """todoWrite, goals (judged after every turn) and loops (a durable timer for the earliest due one)."""

    def __init__(self, port: SessionPort) -> None:
        super().__init__(port)
        # Set when loops change so the scheduler recomputes its timer (not state: the schedule itself is).
        self._loops_changed = False
        self._loop_scheduler: asyncio.Task[None] | None = None

    def native_tools(self) -> dict[str, NativeHandler]:
        return {
            "todoWrite": self._tool_todo_write,
            "createGoal": self._tool_create_goal,
            "completeGoal": self._tool_complete_goal,
            "cancelGoal": self._tool_cancel_goal,
            "createLoop": self._tool_create_loop,
            "cancelLoop": self._tool_cancel_loop,
            "completeLoop": self._tool_complete_loop,
            "listLoops": self._tool_list_loops,
            "pauseLoop": self._tool_pause_loop,
            "resumeLoop": self._tool_resume_loop,
        }

    def schema_minimums(self) -> dict[str, dict[str, int]]:
        """createLoop's interval minimum as this session enforces it (the schema's static one is the lowest
        any session may configure), so the model is told the floor it meets."""
        if "createLoop" not in self.config.tools:
            return {}
        return {"createLoop": {"interval_seconds": loop_schema_floor(self._loop_floor())}}

    # ---- todoWrite ----------------------------------------------------------------------------------

    async def _tool_todo_write(self, args: TodoWriteArgs, call: ToolCall) -> ToolCallOutput:
        self.state.planning.todos = list(args.todos)
        self.port.publish("todos", todos=[t.model_dump() for t in args.todos])
        self.port.refresh_details()
        done = sum(1 for t in args.todos if t.status == "completed")
        return ToolCallOutput(
            content=f"Todo list updated: {len(args.todos)} items, {done} completed.\n"
            + render_todos(args.todos)
            + in_progress_hint(args.todos)
        )

    # ---- goals --------------------------------------------------------------------------------------

    async def _tool_create_goal(self, args: CreateGoalArgs, call: ToolCall) -> ToolCallOutput:
        p = self.state.planning
        active = p.active_goal()
        if active is not None:
            # One goal at a time: continuation turns and the judge have one condition to drive.
            return tool_error(
                f"Goal {active.goal_id} is already active ({active.condition!r}); complete or cancel it "
                "before creating another."
            )
        now = self.now_iso()
        goal = Goal(
            goal_id=f"goal-{p.next_goal}",
            condition=args.condition,
            max_turns=args.max_turns,
            created_at=now,
            updated_at=now,
        )
        p.next_goal += 1
        p.goals.append(goal)
        p.prune()
        self._goal_event(goal, "created")
        return ToolCallOutput(
            content=(
                f"Goal {goal.goal_id} created: {goal.condition}. It is checked after every turn and I keep "
                f"working on it automatically for at most {goal.max_turns} turns. Call completeGoal with "
                f"goal_id={goal.goal_id!r} once it is met."
            ),
            data=goal.model_dump(),
        )

    async def _tool_complete_goal(self, args: CompleteGoalArgs, call: ToolCall) -> ToolCallOutput:
        reason = args.reason or "completed by the agent"
        return self._ended(self._live_goal(args.goal_id), "completed", reason, "marked as completed.")

    async def _tool_cancel_goal(self, args: GoalIdArgs, call: ToolCall) -> ToolCallOutput:
        return self._ended(self._live_goal(args.goal_id), "cancelled", "cancelled by the agent", "cancelled.")

    # ---- goals and loops: one tracked-item mechanism -----------------------------------------------------

    def _live_item(self, items: Sequence[T], item_id: str) -> T | ToolCallOutput:
        """The goal or loop ``item_id`` if it is still live; else the tool error the model gets."""
        found = next((i for i in items if i.item_id == item_id.strip()), None)
        kind = type(items[0]).KIND if items else "item"
        if found is None:
            known = ", ".join(f"{i.item_id} ({getattr(i, 'status', '?')})" for i in items) or "none"
            return tool_error(f"Unknown {kind} id {item_id!r}. {kind.capitalize()}s in this session: {known}.")
        if not found.live:
            return tool_error(f"{found.KIND.capitalize()} {found.item_id} is already {getattr(found, 'status', '?')}.")
        return found

    def _finish_item(self, item: TrackedItem, status: str, reason: str) -> bool:
        """End a goal or loop; drop the turns queued for it. Returns whether a queued turn was dropped."""
        item.status = status  # type: ignore[attr-defined]
        item.reason = reason
        item.updated_at = self.now_iso()
        before = len(self.state.inbox)
        # A turn queued for an item that is over would only confuse the model.
        self.state.inbox = [
            t
            for t in self.state.inbox
            if not (t.kind == item.TRIGGER and t.meta.get(f"{item.KIND}_id") == item.item_id)
        ]
        return len(self.state.inbox) != before

    def _ended(self, found: Goal | Loop | ToolCallOutput, status: str, reason: str, said: str) -> ToolCallOutput:
        """The goal or loop tools' end of an item: the look-up's error, or the item ended and ``said``."""
        if isinstance(found, ToolCallOutput):
            return found
        if isinstance(found, Goal):
            self._finish_goal(found, status, reason)
        else:
            self._finish_loop(found, status, reason)
        return ToolCallOutput(content=f"{found.KIND.capitalize()} {found.item_id} {said}", data=found.model_dump())

    def _live_goal(self, goal_id: str) -> Goal | ToolCallOutput:
        return self._live_item(self.state.planning.goals, goal_id)

    def _finish_goal(self, goal: Goal, status: str, reason: str) -> None:
        self._finish_item(goal, status, reason)
        self._goal_event(goal, status)

    def _goal_event(self, goal: Goal, event: str) -> None:
        self.port.publish("goal", event=event, **goal.model_dump())
        self.touch()
        self.port.refresh_details()

    async def _check_goal(self) -> None:
        """After a turn: count it for the active goal, judge, then continue, complete or exhaust."""
        goal = self.state.planning.active_goal()
        if goal is None:
            return
        goal.completed_turns += 1
        verdict = await self._judge(goal)
        if goal.status != "active":
            return
        goal.judgements += 1
        goal.reason = verdict.reason
        goal.updated_at = self.now_iso()
        if verdict.met:
            self._finish_goal(goal, "completed", verdict.reason or "the judge found the condition met")
            return
        if goal.completed_turns >= goal.max_turns:
            self._finish_goal(goal, "exhausted", f"not met after {goal.max_turns} turns: {verdict.reason}")
            self.enqueue(
                Trigger(
                    kind="system",
                    content=(
                        f"The goal {goal.goal_id} ({goal.condition!r}) was not met within its "
                        f"{goal.max_turns} turns and has stopped (exhausted). Last check: "
                        f"{verdict.reason or 'not met'}. Tell the user where things stand: what was achieved "
                        "and what is left."
                    ),
                    meta={"goal_id": goal.goal_id, "goal_event": "exhausted"},
                )
            )
            return
        self._goal_event(goal, "checked")
        # Any queued trigger runs a turn anyway and the goal is checked after it: no extra continuation.
        if not self.state.inbox:
            self.enqueue(
                Trigger(
                    kind="goal",
                    content=(
                        f"Keep working toward the goal: {goal.condition} (turn {goal.completed_turns + 1} "
                        f"of at most {goal.max_turns}). Not met yet: {verdict.reason or 'no reason given'}. "
                        f"Call completeGoal with goal_id={goal.goal_id!r} when it is met."
                    ),
                    meta={"goal_id": goal.goal_id, "turn": goal.completed_turns + 1},
                )
            )

    async def _judge(self, goal: Goal) -> GoalVerdict:
        try:
            verdict: GoalVerdict = await self.port.execute_activity(
                ACTIVITY_JUDGE_GOAL,
                JudgeGoalInput(
                    session_id=self.config.session_id,
                    root_id=self.config.root_id,
                    agent=self.config.agent,
                    goal_id=goal.goal_id,
                    condition=goal.condition,
                    completed_turns=goal.completed_turns,
                    max_turns=goal.max_turns,
                    position=self.state.transcript_len,
                    judgements=goal.judgements,
                    budget=self.port.session_ref().budget,
                ),
                result_type=GoalVerdict,
                options=call_options(self.config.policy.goal_judge, MODEL_NON_RETRYABLE),
                summary=f"judge {goal.goal_id} after turn {goal.completed_turns}",
            )
        except ActivityError as exc:
            # A judge that cannot answer must not end the goal: count it as not met and say why.
            return GoalVerdict(met=False, reason=f"the goal judge failed: {failure_detail(exc)}")
        if verdict.usage is not None:
            self.state.usage = self.state.usage + verdict.usage
        return verdict

    # ---- loops --------------------------------------------------------------------------------------

    def _loop_floor(self) -> float:
        return self.config.options.loop_min_interval_seconds or DEFAULT_LOOP_FLOOR_SECONDS

    async def _tool_create_loop(self, args: CreateLoopArgs, call: ToolCall) -> ToolCallOutput:
        refusal = loop_interval_refusal(args.interval_seconds, self._loop_floor())
        if refusal is not None:
            return tool_error(refusal)
        p = self.state.planning
        now = self.port.now()
        loop = Loop(
            loop_id=f"loop-{p.next_loop}",
            prompt=args.prompt,
            interval_seconds=args.interval_seconds,
            max_turns=args.max_turns,
            created_at=now.isoformat(),
            updated_at=now.isoformat(),
            next_run_at=(now + timedelta(seconds=args.interval_seconds)).isoformat(),
            expires_at=loop_expiry(now, args.interval_seconds, args.max_turns).isoformat(),
        )
        p.next_loop += 1
        p.loops.append(loop)
        p.prune()
        self._loop_event(loop, "created")
        return ToolCallOutput(
            content=(
                f"Loop {loop.loop_id} created: every {loop.interval_seconds} seconds, at most "
                f"{loop.max_turns} turns; first run at {loop.next_run_at}."
            ),
            data=loop.model_dump(),
        )

    async def _tool_cancel_loop(self, args: LoopIdArgs, call: ToolCall) -> ToolCallOutput:
        return self._ended(self._live_loop(args.loop_id), "cancelled", "cancelled by the agent", "cancelled.")

    async def _tool_complete_loop(self, args: CompleteLoopArgs, call: ToolCall) -> ToolCallOutput:
        p = self.state.planning
        if args.loop_id:
            found = self._live_loop(args.loop_id)
        else:
            running = self._running_loop_id()
            live = p.live_loops()
            if running is not None:
                found = self._live_loop(running)
            elif len(live) == 1:
                found = live[0]
            else:
                known = ", ".join(f"{lp.loop_id} ({lp.status})" for lp in live) or "none"
                return tool_error(f"Which loop? No loop turn is running; pass loop_id. Live loops: {known}.")
        return self._ended(found, "completed", args.reason, f"completed: {args.reason}")

    async def _tool_list_loops(self, args: ListLoopsArgs, call: ToolCall) -> ToolCallOutput:
        loops = self.state.planning.loops
        rows = [
            lp.model_dump(
                include={
                    "loop_id",
                    "prompt",
                    "interval_seconds",
                    "max_turns",
                    "completed_turns",
                    "status",
                    "next_run_at",
                    "last_run_at",
                    "reason",
                }
            )
            for lp in loops
        ]
        return ToolCallOutput(content=json.dumps(rows, ensure_ascii=False), data={"loops": rows})

    async def _tool_pause_loop(self, args: LoopIdArgs, call: ToolCall) -> ToolCallOutput:
        loop = self._live_loop(args.loop_id)
        if isinstance(loop, ToolCallOutput):
            return loop
        if loop.status == "paused":
            return tool_error(f"Loop {loop.loop_id} is already paused.")
        loop.status = "paused"
        loop.paused_at = self.now_iso()
        loop.next_run_at = None
        self._drop_queued_tick(loop)
        self._loop_event(loop, "paused")
        return ToolCallOutput(
            content=f"Loop {loop.loop_id} paused after {loop.completed_turns} of {loop.max_turns} turns.",
            data=loop.model_dump(),
        )

    async def _tool_resume_loop(self, args: LoopIdArgs, call: ToolCall) -> ToolCallOutput:
        loop = self._live_loop(args.loop_id)
        if isinstance(loop, ToolCallOutput):
            return loop
        if loop.status != "paused":
            return tool_error(f"Loop {loop.loop_id} is not paused (it is {loop.status}).")
        now = self.port.now()
        if loop.paused_at and loop.expires_at:
            # Paused time does not count towards the loop's expiry.
            loop.expires_at = (parse_time(loop.expires_at) + (now - parse_time(loop.paused_at))).isoformat()
        loop.status = "active"
        loop.paused_at = None
        loop.next_run_at = (now + timedelta(seconds=loop.interval_seconds)).isoformat()
        self._loop_event(loop, "resumed")
        return ToolCallOutput(
            content=f"Loop {loop.loop_id} resumed; next run at {loop.next_run_at}.", data=loop.model_dump()
        )

    def _live_loop(self, loop_id: str) -> Loop | ToolCallOutput:
        return self._live_item(self.state.planning.loops, loop_id)

    def _running_loop_id(self) -> str | None:
        """The loop whose tick turn is running: a pending tick that is no longer in the inbox."""
        queued = {t.meta.get("loop_id") for t in self.state.inbox if t.kind == "loop"}
        for lp in self.state.planning.loops:
            if lp.tick_pending and lp.loop_id not in queued:
                return lp.loop_id
        return None

    def _drop_queued_tick(self, loop: Loop) -> None:
        before = len(self.state.inbox)
        self.state.inbox = [
            t for t in self.state.inbox if not (t.kind == "loop" and t.meta.get("loop_id") == loop.loop_id)
        ]
        if len(self.state.inbox) != before:
            loop.tick_pending = False

    def _finish_loop(self, loop: Loop, status: str, reason: str) -> None:
        loop.next_run_at = None
        if self._finish_item(loop, status, reason):
            loop.tick_pending = False
        self._loop_event(loop, status)

    def _loop_event(self, loop: Loop, event: str) -> None:
        loop.updated_at = self.now_iso()
        self._loops_changed = True
        self.port.publish("loop", event=event, **loop.model_dump())
        self.touch()
        self.port.refresh_details()

    async def _run_loop_scheduler(self) -> None:
        """Durable timer for the earliest due loop; recomputed whenever a loop changes."""
        while True:
            self._loops_changed = False
            self._fire_due_loops()
            due = self._next_due()
            if due is None:
                await self.port.wait_condition(lambda: self._loops_changed)
                continue
            delay = due - self.port.now()
            if delay <= timedelta(0):
                continue
            try:
                await self.port.wait_condition(
                    lambda: self._loops_changed, timeout=delay, summary=self._due_summary(due)
                )
            except TimeoutError:
                pass

    def _next_due(self) -> datetime | None:
        times: list[datetime] = []
        for lp in self.state.planning.loops:
            if lp.status != "active":
                continue
            if lp.next_run_at:
                times.append(parse_time(lp.next_run_at))
            if lp.expires_at:
                times.append(parse_time(lp.expires_at))
        return min(times) if times else None

    def _due_summary(self, due: datetime) -> str:
        """The timer's name in the UI: which loops tick (or expire) when it fires (``loop-1 tick``)."""
        ticks: list[str] = []
        for lp in self.state.planning.loops:
            if lp.status != "active":
                continue
            if lp.next_run_at and parse_time(lp.next_run_at) == due:
                ticks.append(f"{lp.loop_id} tick")
            elif lp.expires_at and parse_time(lp.expires_at) == due:
                ticks.append(f"{lp.loop_id} expiry")
        return ", ".join(ticks)[:200] or "loop timer"

    def _fire_due_loops(self) -> None:
        now = self.port.now()
        for lp in self.state.planning.loops:
            if lp.status != "active":
                continue
            if lp.expires_at and now >= parse_time(lp.expires_at):
                self._finish_loop(lp, "exhausted", f"expired after {lp.completed_turns} of {lp.max_turns} turns")
                continue
            if not lp.next_run_at or parse_time(lp.next_run_at) > now:
                continue
            scheduled = parse_time(lp.next_run_at)
            step = timedelta(seconds=lp.interval_seconds)
            missed = int((now - scheduled) / step)
            if lp.tick_pending:
                # The previous tick has not run yet: this one coalesces into it (one turn serves both).
                lp.coalesced_ticks += 1 + missed
            else:
                lp.coalesced_ticks += missed
                lp.ticks += 1
                lp.tick_pending = True
                self.enqueue(Trigger(kind="loop", content=lp.prompt, meta={"loop_id": lp.loop_id, "tick": lp.ticks}))
            lp.next_run_at = next_after(scheduled, now, lp.interval_seconds).isoformat()
            self._loop_event(lp, "tick")
        self._loops_changed = False

    def _loop_turn_done(self, trigger: Trigger) -> None:
        loop = self.state.planning.loop(str(trigger.meta.get("loop_id", "")))
        if loop is None:
            return
        loop.tick_pending = False
        loop.completed_turns += 1
        loop.last_run_at = self.now_iso()
        if loop.status in ("active", "paused") and loop.completed_turns >= loop.max_turns:
            self._finish_loop(loop, "exhausted", f"reached max_turns ({loop.max_turns})")
        else:
            self._loop_event(loop, "turn_done")

    # ---- queries ------------------------------------------------------------------------------------

    def query_todos(self) -> list[TodoItem]:
        return self.state.planning.todos

    def query_goals(self) -> list[Goal]:
        return self.state.planning.goals

    def query_loops(self) -> list[Loop]:
        return self.state.planning.loops

    def query_planning_state(self) -> PlanningState:
        return self.state.planning

    # ---- hooks --------------------------------------------------------------------------------------

    def on_start(self) -> None:
        self._loops_changed = False
        # Lives as long as the run; continue-as-new starts a fresh one from the carried state.
        self._loop_scheduler = asyncio.create_task(self._run_loop_scheduler())

    async def after_turn(self, trigger: Trigger) -> None:
        if trigger.kind == "loop":
            self._loop_turn_done(trigger)
        await self._check_goal()

    def pending_work(self) -> list[str]:
        reasons: list[str] = []
        p = self.state.planning
        goal = p.active_goal()
        if goal is not None:
            reasons.append(f"goal {goal.goal_id} is active")
        reasons += [f"loop {lp.loop_id} is {lp.status}" for lp in p.live_loops()]
        return reasons

    async def on_stop(self, reason: str) -> None:
        p = self.state.planning
        goal = p.active_goal()
        if goal is not None:
            self._finish_goal(goal, "cancelled", f"session stopped: {reason}")
        for lp in p.live_loops():
            self._finish_loop(lp, "cancelled", f"session stopped: {reason}")

    def details_sections(self) -> list[str]:
        sections: list[str] = []
        p = self.state.planning
        if p.todos:
            sections.append("**Todos**\n" + render_todos(p.todos))
        if p.goals:
            sections.append("**Goals**\n" + render_goals(p.goals))
        if p.loops:
            sections.append("**Loops**\n" + render_loops(p.loops))
        return sections

    HANDLERS = (
        query(QUERY_TODOS, query_todos),
        query(QUERY_GOALS, query_goals),
        query(QUERY_LOOPS, query_loops),
        query(QUERY_PLANNING_STATE, query_planning_state),
    )
