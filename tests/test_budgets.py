"""Budgets over the whole session tree: a cost and token ceiling that count every model call of
a session and of its descendants; once reached, model calls and new sub-agents are refused with a clear
message, running children are told, the Temporal UI's current details show the spend against the ceiling;
per-organisation defaults in settings. Pure rules, then sessions on the real dev server with the scripted
model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from agent_tools._activity_io import ProgressEvent
from agent_tools._budget import (
    BudgetLimits,
    BudgetNotice,
    BudgetSettings,
    BudgetState,
    budget_line,
    exceeded,
    tool_refusal,
    tree_spend,
)
from agent_tools._client import SessionHandle
from agent_tools._messages import Usage
from agent_tools._session import SessionOptions, SessionStatus
from agent_tools._settings import Price, Settings
from tests.support.fixture_types import WorkerFor
from tests.support.sessions import current_details

# ---- pure rules ---------------------------------------------------------------------------------------------


def test_ceilings_are_reached_at_or_over_their_value() -> None:
    spent = Usage(calls=3, input_tokens=600, output_tokens=400, cost_usd=0.25)
    assert exceeded(None, None, spent) is None
    assert exceeded(1.0, 2000, spent) is None
    assert exceeded(0.25, None, spent) == "the session tree's budget is spent: $0.2500 of its $0.2500 cost ceiling"
    assert exceeded(None, 1000, spent) == "the session tree's budget is spent: 1,000 of its 1,000 token ceiling"


def test_the_tree_spend_is_the_stores_figure_or_the_sessions_own_count_whichever_is_more() -> None:
    own, children = Usage(calls=1, input_tokens=10, cost_usd=0.1), Usage(calls=1, output_tokens=5, cost_usd=0.2)
    assert tree_spend(own, children, BudgetState()) == own + children
    stored = Usage(calls=7, input_tokens=100, output_tokens=1, cost_usd=0.05)
    assert tree_spend(own, children, BudgetState(tree_spent=stored)) == Usage(
        calls=7, input_tokens=100, output_tokens=5, cost_usd=0.3
    )


def test_only_tools_that_start_a_sub_agent_are_refused_and_the_details_show_the_spend() -> None:
    limits = BudgetLimits(cost_usd=1.0, tokens=500)
    spent = Usage(input_tokens=300, output_tokens=250, cost_usd=0.5)
    assert tool_refusal("todoWrite", limits, spent, BudgetState()) is None
    refusal = tool_refusal("subAgent", limits, spent, BudgetState())
    assert refusal == (
        "subAgent refused: the session tree's budget is spent: 550 of its 500 token ceiling; "
        "no new sub-agents start. Finish with what you have."
    )
    told = BudgetState(reached="told by the parent p: spent")
    assert "told by the parent p" in (tool_refusal("invoke_sub_agent", BudgetLimits(), Usage(), told) or "")
    assert budget_line(BudgetLimits(), spent, BudgetState()) is None
    assert budget_line(limits, spent, told) == (
        "**Budget (whole tree)** $0.5000 of $1.0000 · 550 of 500 tokens  \n**reached**: told by the parent p: spent"
    )


def test_organisation_defaults_come_from_settings_field_by_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOLS_BUDGETS__DEFAULT", '{"cost_usd": 5}')
    monkeypatch.setenv("AGENT_TOOLS_BUDGETS__ORGANISATIONS", '{"acme": {"tokens": 1000}}')
    budgets = Settings().budgets
    assert budgets.for_organisation("acme") == BudgetLimits(cost_usd=5, tokens=1000)
    assert budgets.for_organisation("other") == BudgetLimits(cost_usd=5)
    assert BudgetSettings().for_organisation("x").is_set() is False


def test_a_child_inherits_the_budget_of_its_tree() -> None:
    options = SessionOptions(budget_cost_usd=2.0, budget_tokens=100, memory=False, delegation_fanout_cap=2)
    assert options.delegation_only().model_dump() == {
        "budget_cost_usd": 2.0,
        "budget_tokens": 100,
        "delegation_fanout_cap": 2,
    }


# ---- sessions on the dev server ---------------------------------------------------------------------------

TODO = {"name": "todoWrite", "arguments": {"todos": [{"content": "x", "status": "pending"}]}}


async def test_a_spent_budget_refuses_the_next_model_call_and_the_details_show_it(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings, store_url: str
) -> None:
    settings.database_url = store_url  # the tree's spend is the store's sum: both stores
    settings.model = script([{"say": "planning", "tool_calls": [TODO]}, {"say": "done"}])
    async with worker_for(settings=settings) as client:
        handle = await client.start_session("go", options={"budget_tokens": 1})
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == SessionStatus.failed and result.usage.calls == 1
        spent = result.usage.input_tokens + result.usage.output_tokens
        assert result.error == (
            f"model call failed: model call refused: the session tree's budget is spent: {spent:,} of its 1 token ceiling"
        )
        details = await current_details(handle)
        assert f"**Budget (whole tree)** {spent:,} of 1 tokens" in details
        assert "**reached**: the session tree's budget is spent" in details
        # Without a budget the same script runs to the end.
        settings.model = script([{"say": "planning", "tool_calls": [TODO]}, {"say": "done"}])
        free = await client.run("go", model=settings.model)
        assert free.status == SessionStatus.completed and free.usage.calls == 2


async def test_organisation_defaults_apply_and_a_request_may_set_its_own(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.budgets = BudgetSettings(organisations={"acme": BudgetLimits(cost_usd=0.5)})
    model = script([{"say": "planning", "tool_calls": [TODO]}, {"say": "done"}])
    settings.model = model
    # One dollar per token: the first step spends far more than the ceiling.
    settings.prices = {model: Price(input_per_mtok=1e6, output_per_mtok=1e6)}
    async with worker_for() as client:
        capped = await client.run("go", organisation="acme")
        assert capped.status == SessionStatus.failed and "of its $0.5000 cost ceiling" in (capped.error or "")
        other = await client.run("go", organisation="other")
        assert other.status == SessionStatus.completed
        own = await client.run("go", organisation="acme", options={"budget_cost_usd": 1e6})
        assert own.status == SessionStatus.completed


async def _first(
    handle: SessionHandle,
    kind: str,
    timeout: float = 30,
    where: Callable[[ProgressEvent], bool] = lambda e: True,
) -> ProgressEvent:
    async def find() -> ProgressEvent:
        async for event in handle.progress():
            if event.kind == kind and where(event):
                return event
        raise AssertionError(f"no {kind} event")

    return await asyncio.wait_for(find(), timeout)


async def test_the_tree_counts_every_call_refuses_new_sub_agents_and_tells_running_children(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    slow = {"name": "subAgent", "arguments": {"title": "Slow child", "instruction": "CHILD work", "mode": "async"}}
    second = {"name": "subAgent", "arguments": {"title": "Second", "instruction": "CHILD more", "mode": "sync"}}
    settings.model = script(
        [
            {"match": {"title": "Slow child"}, "turns": [{"say": "child done", "delay_seconds": 4}]},
            {"match": {"title": "Second"}, "turns": [{"say": "never"}]},
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"say": "", "tool_calls": [slow]},
                    # About 10,000 output tokens: past the tree's ceiling while the slow child still runs.
                    # (1.5 s late, so that the slow child's call is running by then.)
                    {"say": "x " * 20_000, "tool_calls": [second], "delay_seconds": 1.5},
                    {"say": "never reached"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT work", options={"budget_tokens": 5000})
        refused = asyncio.create_task(_first(handle, "tool_finished", where=lambda e: e.data["tool"] == "subAgent"
                                             and bool(e.data["is_error"])))  # fmt: skip
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == SessionStatus.failed
        assert "model call refused: the session tree's budget is spent" in (result.error or "")
        children = await handle.query("subagents", list[dict[str, Any]])
        assert [c["title"] for c in children] == ["Slow child"]  # the second was never started
        # The refusal is the tool's result (the turn's next step was refused, so it stays unsent).
        assert str((await refused).data["preview"]).startswith("subAgent refused: the session tree's budget is spent: ")
        child = client.session(children[0]["session_id"])
        told = await _first(child, "budget")
        assert str(told.data["reason"]).startswith(f"told by the parent {handle.id}: the session tree's budget")
        assert "**reached**: told by the parent" in await current_details(child)
        # The child's call was already running when it was told; the ceiling is checked before a call.
        assert (await asyncio.wait_for(child.result(), 30)).final_message == "child done"


async def test_the_budget_and_its_spend_survive_continue_as_new(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    settings.model = script([{"say": "one"}, {"say": "two"}])
    async with worker_for() as client:
        handle = await client.start_session(
            "first", keep_alive=True, options={"budget_tokens": 1, "continue_as_new_after_turns": 1}
        )
        first_run = None
        for _ in range(200):
            status = await handle.status()
            if status.turns == 1 and status.status == SessionStatus.idle:
                first_run = (await handle.workflow.describe()).run_id
                break
            await asyncio.sleep(0.05)
        await handle.send("second")
        for _ in range(200):
            if (await handle.status()).error:
                break
            await asyncio.sleep(0.05)
        status = await handle.status()
        assert (await handle.workflow.describe()).run_id != first_run
        assert status.error is not None and "token ceiling" in status.error and status.usage.calls == 1
        details = await current_details(handle)
        assert "**Budget (whole tree)**" in details and "**reached**: the session tree's budget is spent" in details
        await handle.stop("done")
        await asyncio.wait_for(handle.result(), 30)


async def test_the_goal_judge_is_refused_like_any_model_call(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    goal = {"name": "createGoal", "arguments": {"condition": "the report is written", "max_turns": 1}}
    settings.model = script(
        [
            {"match": {"agent": "goal-judge"}, "turns": [{"say": '{"met": true, "reason": "written"}'}]},
            {"turns": [{"say": "", "tool_calls": [goal]}, {"say": "written"}]},
        ]
    )
    async with worker_for() as client:
        # The ceiling sits between the session's first step and the judge's call after the turn.
        handle = await client.start_session("write", keep_alive=True, options={"budget_tokens": 1})
        for _ in range(200):
            goals = await handle.query("goals", list[dict[str, Any]])
            if goals and goals[0]["status"] != "active":
                break
            await asyncio.sleep(0.05)
        assert goals[0]["status"] == "exhausted", goals
        assert "the goal judge failed: model call refused: the session tree's budget is spent" in goals[0]["reason"]
        await handle.stop("done")
        await asyncio.wait_for(handle.result(), 30)


async def test_spawn_agent_reads_the_same_spend_and_the_lower_ceiling_binds(
    worker_for: WorkerFor, script: Callable[[list[Any]], str], settings: Settings
) -> None:
    spawn = {"name": "spawn_agent", "arguments": {"task": "look around", "role": "explore"}}
    model = script([{"say": "", "tool_calls": [spawn]}, {"say": "never"}])
    settings.model = model
    settings.prices = {model: Price(input_per_mtok=1e6, output_per_mtok=1e6)}  # a dollar a token
    async with worker_for() as client:
        handle = await client.start_session("go", tools=["spawn_agent"], options={"budget_cost_usd": 0.5})
        finished = asyncio.create_task(_first(handle, "tool_finished", where=lambda e: e.data["tool"] == "spawn_agent"))
        result = await asyncio.wait_for(handle.result(), 60)
        preview = str((await finished).data["preview"])  # the progress stream's rendering of codai's JSON
        # The step that asked for the spawn spent past the tree's $0.50: codai's error shape, the budget's ceiling.
        assert preview == f"error: request_cost_ceiling; ceiling_usd: 0.5; spent_usd: {result.usage.cost_usd}"
        assert result.usage.calls == 1 and result.usage.cost_usd > 0.5
        assert await handle.query("subagents", list[dict[str, Any]]) == []


async def test_a_parents_budget_signal_in_the_first_activation_reaches_the_budget_part(
    settings: Settings, script: Callable[[list[Any]], str], worker_for: Any
) -> None:
    """A part's signal that arrives with the start (before prepare has run) is routed to the part and kept:
    the session then refuses to start a sub-agent."""
    from agent_tools._session import SessionInput, SessionRequest, SessionResult
    from agent_tools._session_names import SIGNAL_BUDGET_REACHED

    settings.model = script(
        [
            {"tool_calls": [{"name": "subAgent", "arguments": {"title": "t", "instruction": "go", "mode": "sync"}}]},
            {"say": "after: {{last_tool}}"},
        ]
    )
    async with worker_for() as client:
        handle = await client.temporal.start_workflow(
            "AgentSession",
            SessionInput(request=SessionRequest(prompt="delegate", tools=["subAgent"])),
            id=f"first-activation-{settings.task_queue}",
            task_queue=settings.task_queue,
            start_signal=SIGNAL_BUDGET_REACHED,
            start_signal_args=[BudgetNotice(reason="root: spent")],
            result_type=SessionResult,
        )
        result = await asyncio.wait_for(handle.result(), 60)
    assert result.status == SessionStatus.completed
    assert result.final_message == (
        "after: subAgent refused: told by the parent root: spent; no new sub-agents start. Finish with what you have."
    )
