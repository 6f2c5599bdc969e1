"""The session's capability parts without a workflow: each runs against a fake port that records what the
part asks of the session (progress, status, activities, signals) and answers its activities from a table."""

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast, get_args

import pytest
from temporalio.common import WorkflowIDReusePolicy
from temporalio.workflow import _Definition

from agent_tools import _search_attributes as sa
from agent_tools import _session_names as session_names
from agent_tools._activity_io import LlmStepOutput, SessionRef, ToolCallOutput
from agent_tools._budget import BudgetNotice
from agent_tools._catalog.registry import builtin_specs
from agent_tools._messages import Message, ToolCall, Usage
from agent_tools._session import (
    ParkedCall,
    SessionConfig,
    SessionInput,
    SessionOptions,
    SessionRequest,
    SessionState,
    SessionStatus,
    Trigger,
)
from agent_tools._session_start import SessionStart, child_start, handoff_start, root_start
from agent_tools.contracts._delegation import (
    ACT_LATEST_MESSAGE,
    ChildRecord,
    LatestMessageOutput,
    SubAgentMessage,
    SubSessionArgs,
)
from agent_tools.contracts._human import AnswerQuestions, AnswerRejected, AskUserArgs
from agent_tools.contracts._planning import (
    ACTIVITY_JUDGE_GOAL,
    CompleteGoalArgs,
    CreateGoalArgs,
    CreateLoopArgs,
    GoalVerdict,
    LoopIdArgs,
    TodoWriteArgs,
)
from agent_tools.workflows._budget import BudgetPart
from agent_tools.workflows._delegation import DelegationPart
from agent_tools.workflows._human import HumanPart
from agent_tools.workflows._planning import PlanningPart
from agent_tools.workflows._port import ChildHandle, SessionPort
from agent_tools.workflows._session import PARTS, AgentSession

R = TypeVar("R")
START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class FakePort:
    """A :class:`SessionPort` with a clock that stands still and activities answered from ``replies``."""

    def __init__(self, **options: Any) -> None:
        self.state = SessionState()
        self._config = SessionConfig(
            session_id="s-1",
            agent="assistant",
            organisation="org",
            project="proj",
            user="u",
            title="t",
            model="scripted",
            tools=[],
            max_steps=5,
            root_id="s-1",
            options=SessionOptions.model_validate(options),
        )
        self.is_prepared = True
        self.published: list[tuple[str, dict[str, object]]] = []
        self.statuses: list[SessionStatus] = []
        self.activities: list[tuple[str, Any, Mapping[str, Any]]] = []
        self.replies: dict[str, Callable[[Any], Any]] = {}
        self.signals: list[tuple[str, str, Any]] = []
        self._ids = 0

    @property
    def config(self) -> SessionConfig:
        return self._config

    @property
    def prepared(self) -> bool:
        return self.is_prepared

    @property
    def stopping(self) -> bool:
        return False

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        return logging.LoggerAdapter(logging.getLogger("fake-port"))

    def patched(self, patch_id: str) -> bool:
        return True

    def now(self) -> datetime:
        return START

    def uuid4(self) -> str:
        self._ids += 1
        return f"00000000-0000-4000-8000-{self._ids:012d}"

    def publish(self, kind: str, **data: object) -> None:
        self.published.append((kind, data))

    def kinds(self) -> list[str]:
        return [k for k, _ in self.published]

    def set_status(self, status: SessionStatus) -> None:
        self.state.status = status
        self.statuses.append(status)

    def refresh_details(self) -> None:
        pass

    def session_ref(self) -> SessionRef:
        return SessionRef.of(self.config, "run-1", self.state.turns)

    def parked_call(self, call: ToolCall, kind: str, ref: str) -> ParkedCall | None:
        return None

    async def parked_wait(
        self,
        parked: ParkedCall | None,
        done: Callable[[], bool],
        timeout: float | timedelta | None = None,
        *,
        summary: str | None = None,
    ) -> None:
        await self.wait_condition(done, timeout, summary=summary)

    async def wait_condition(
        self, done: Callable[[], bool], timeout: float | timedelta | None = None, *, summary: str | None = None
    ) -> None:
        # A timed wait the test does not satisfy at once times out; an untimed one waits for the test.
        for _ in range(50 if timeout is not None else 10_000):
            if done():
                return
            await asyncio.sleep(0)
        raise TimeoutError

    async def execute_activity(
        self,
        activity: str,
        arg: Any,
        *,
        result_type: type[R] | None,
        summary: str | None,
        options: Mapping[str, Any],
        local: bool = False,
    ) -> R:
        self.activities.append((activity, arg, options))
        return cast(R, self.replies[activity](arg))

    async def start_child(self, session: SessionInput, start: SessionStart) -> ChildHandle:
        raise AssertionError("no child is started in these tests")

    async def signal_external(self, workflow_id: str, signal: str, arg: Any) -> None:
        self.signals.append((workflow_id, signal, arg))


def _port(**options: Any) -> FakePort:
    port = FakePort(**options)
    _: SessionPort = port  # the fake is a whole port: mypy checks it against the protocol
    return port


def _call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"call-{name}", name=name, arguments=arguments)


def test_the_parts_own_every_workflow_native_tool_once_as_bound_handlers() -> None:
    port = _port()
    parts = [cls(port) for cls in PARTS]
    tables = [p.native_tools() for p in parts]
    names = [name for t in tables for name in t]
    assert len(names) == len(set(names))
    workflow_specs = {s.name for s in builtin_specs() if s.runs_in == "workflow"}
    assert set(names) == workflow_specs
    for part, table in zip(parts, tables, strict=True):
        assert all(getattr(h, "__self__", None) is part for h in table.values())
    # Every parked wait a tool may leave has its resumption (an approval's is the session's own gate).
    resumed = {kind for p in parts for kind in p.resume_handlers()}
    assert resumed == set(get_args(ParkedCall.model_fields["kind"].annotation)) - {"approval"}


def test_the_session_registers_exactly_the_shared_names() -> None:
    defn = _Definition.must_from_class(AgentSession)
    registered = {*defn.signals, *defn.updates, *defn.queries}
    shared = {v for k, v in vars(session_names).items() if k.isupper() and isinstance(v, str)}
    assert registered == shared
    assert all(defn.updates[name].validator is not None for name in defn.updates)


async def test_todo_write_replaces_the_list_and_tells_the_client() -> None:
    port = _port()
    planning = PlanningPart(port)
    args = TodoWriteArgs.model_validate(
        {"todos": [{"content": "a", "status": "completed"}, {"content": "b", "status": "pending"}]}
    )
    out = await planning.native_tools()["todoWrite"](args, _call("todoWrite"))
    assert out.content.startswith("Todo list updated: 2 items, 1 completed.")
    assert [t.content for t in port.state.planning.todos] == ["a", "b"]
    assert port.kinds() == ["todos"]


async def test_goals_end_through_one_path_and_one_goal_is_active_at_a_time() -> None:
    port = _port()
    tools = PlanningPart(port).native_tools()
    created = await tools["createGoal"](CreateGoalArgs(condition="tests pass", max_turns=3), _call("createGoal"))
    assert not created.is_error and port.state.planning.goals[0].goal_id == "goal-1"
    again = await tools["createGoal"](CreateGoalArgs(condition="other"), _call("createGoal"))
    assert again.is_error and "goal-1 is already active" in again.content
    done = await tools["completeGoal"](CompleteGoalArgs(goal_id="goal-1"), _call("completeGoal"))
    assert done.content == "Goal goal-1 marked as completed."
    assert port.state.planning.goals[0].status == "completed"
    twice = await tools["completeGoal"](CompleteGoalArgs(goal_id="goal-1"), _call("completeGoal"))
    assert twice.is_error and twice.content == "Goal goal-1 is already completed."
    unknown = await tools["cancelGoal"](CompleteGoalArgs(goal_id="goal-9"), _call("cancelGoal"))
    assert unknown.is_error and unknown.content.startswith("Unknown goal id 'goal-9'.")


async def test_an_unmet_goal_is_judged_after_the_turn_and_queues_its_continuation() -> None:
    port = _port()
    planning = PlanningPart(port)
    await planning.native_tools()["createGoal"](CreateGoalArgs(condition="ship it", max_turns=3), _call("createGoal"))
    port.replies[ACTIVITY_JUDGE_GOAL] = lambda inp: GoalVerdict(met=False, reason="not yet", usage=Usage(calls=1))
    await planning.after_turn(Trigger(content="go"))
    ((name, judged, options),) = port.activities
    assert name == ACTIVITY_JUDGE_GOAL and judged.goal_id == "goal-1" and judged.completed_turns == 1
    assert options["start_to_close_timeout"] == timedelta(seconds=port.config.policy.goal_judge.start_to_close_seconds)
    assert port.state.usage.calls == 1  # the judge's spend is the session's
    (continuation,) = port.state.inbox
    assert continuation.kind == "goal" and continuation.meta == {"goal_id": "goal-1", "turn": 2}
    port.replies[ACTIVITY_JUDGE_GOAL] = lambda inp: GoalVerdict(met=True, reason="shipped")
    await planning.after_turn(continuation)
    assert port.state.planning.goals[0].status == "completed"
    assert planning.pending_work() == []


async def test_loops_cancel_through_the_same_path_and_drop_their_queued_tick() -> None:
    port = _port()
    planning = PlanningPart(port)
    tools = planning.native_tools()
    await tools["createLoop"](CreateLoopArgs(prompt="check", interval_seconds=300, max_turns=2), _call("createLoop"))
    assert planning.pending_work() == ["loop loop-1 is active"]
    port.state.inbox.append(Trigger(kind="loop", content="check", meta={"loop_id": "loop-1"}))
    out = await tools["cancelLoop"](LoopIdArgs(loop_id="loop-1"), _call("cancelLoop"))
    assert out.content == "Loop loop-1 cancelled."
    assert port.state.inbox == [] and planning.pending_work() == []


async def test_ask_user_waits_for_answers_that_the_update_validates() -> None:
    port = _port()
    human = HumanPart(port)
    args = AskUserArgs.model_validate(
        {
            "questions": [
                {
                    "question": "Which library?",
                    "header": "Library",
                    "options": [{"label": "a", "description": "first"}, {"label": "b", "description": "second"}],
                }
            ]
        }
    )
    ask = human.native_tools()["askUser"]

    async def asked() -> ToolCallOutput:
        return await ask(args, _call("askUser"))

    task = asyncio.create_task(asked())
    await port.wait_condition(lambda: bool(port.state.human.pending))
    assert port.statuses == [SessionStatus.waiting_for_user]
    with pytest.raises(AnswerRejected):
        human.validate_answer_questions(AnswerQuestions.model_validate({"answers": [{"question": "Other?"}]}))
    accepted = human.update_answer_questions(
        AnswerQuestions.model_validate({"answers": [{"question": "Which library?", "selected": ["b"]}]})
    )
    assert accepted.accepted == ["Which library?"] and accepted.remaining == 0
    out = await asyncio.wait_for(task, 5)
    assert not out.is_error and out.data is not None and out.data["timed_out"] is False
    assert port.state.human.pending == [] and port.statuses[-1] == SessionStatus.running
    assert [k for k in port.kinds() if k in ("question", "answer")] == ["question", "answer"]


def _running_child(port: FakePort, child_id: str) -> None:
    now = START.isoformat()
    port.state.delegation.children.append(
        ChildRecord(session_id=child_id, face="subAgent", agent="assistant", title="c", created_at=now, updated_at=now)
    )


async def test_a_reached_budget_is_published_once_and_told_to_each_running_child() -> None:
    port = _port(budget_tokens=100)
    budget = BudgetPart(port)
    _running_child(port, "s-1/sub-1")
    step = LlmStepOutput(message=Message(role="assistant", content="x"), position=1, usage=Usage(input_tokens=150))
    port.state.usage = step.usage
    budget.note_step_spend(step)
    budget.note_step_spend(step)
    await asyncio.sleep(0)
    assert port.kinds() == ["budget"]
    assert port.state.budget.reached is not None and port.state.budget.told == ["s-1/sub-1"]
    ((child, name, notice),) = port.signals
    assert (child, name) == ("s-1/sub-1", session_names.SIGNAL_BUDGET_REACHED) and isinstance(notice, BudgetNotice)
    assert budget.tool_refusal("subAgent") is not None


def test_the_parents_budget_word_before_prepare_is_kept_for_the_run() -> None:
    port = _port()
    port.is_prepared = False
    BudgetPart(port).on_budget_reached(BudgetNotice(reason="root: spent"))
    assert port.state.budget.reached == "told by the parent root: spent"
    assert port.published == []


async def test_a_sub_agent_look_up_relays_the_answer_or_the_refusal() -> None:
    port = _port()
    tool = DelegationPart(port).native_tools()["getSubAgentMessage"]
    message = SubAgentMessage(
        sub_session_id="s-1/sub-1",
        sub_session_title="c",
        sub_session_status="completed",
        message_id="m",
        role="assistant",
        content="hi",
        created_at=None,
    )
    port.replies[ACT_LATEST_MESSAGE] = lambda inp: LatestMessageOutput(message=message)
    out = await tool(SubSessionArgs(sub_session_id="s-1/sub-1"), _call("getSubAgentMessage"))
    assert not out.is_error and SubAgentMessage.model_validate_json(out.content) == message
    port.replies[ACT_LATEST_MESSAGE] = lambda inp: LatestMessageOutput(error="not your sub-agent")
    out = await tool(SubSessionArgs(sub_session_id="other"), _call("getSubAgentMessage"))
    assert out.is_error and out.content == "not your sub-agent"
    assert [a[1].target for a in port.activities] == ["s-1/sub-1", "other"]


def test_a_root_and_a_child_start_from_one_description() -> None:
    root = root_start(
        SessionRequest(prompt="Plan a trip", organisation="o", project="p"), "s-9", search_attributes=True
    )
    assert root.id == "s-9" and root.summary == "assistant: Plan a trip"
    assert root.id_reuse_policy == WorkflowIDReusePolicy.REJECT_DUPLICATE
    assert root.search_attributes is not None and root.search_attributes.get(sa.SESSION_ROOT_ID) == "s-9"
    assert root.details is not None and "o/p · user" in root.details
    config = _port().config
    request = config.child_request("helper", "Look it up", title="lookup")
    child = child_start(request, "s-1/sub-1", search_attributes=True)
    # The parent's Relationships tab reads each child's role, agent, title and task.
    assert child.summary == "sub-agent · helper: lookup · Look it up"
    explorer = config.child_request("explorer", "Find the config\nloader", title="", role="explore")
    assert child_start(explorer, "s-1/sub-3", search_attributes=False).summary == (
        "explore · explorer · Find the config loader"
    )
    attrs = child.search_attributes
    assert attrs is not None
    assert (attrs.get(sa.SESSION_PARENT_ID), attrs.get(sa.SESSION_ROOT_ID), attrs.get(sa.DEPTH)) == ("s-1", "s-1", 1)
    assert child_start(request, "s-1/sub-2", search_attributes=False).search_attributes is None
    handoff = handoff_start("session-x", agent="billing", from_agent="assistant")
    assert handoff.id_reuse_policy == WorkflowIDReusePolicy.ALLOW_DUPLICATE and handoff.details is None
