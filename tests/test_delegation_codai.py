"""codai faces: spawn_agent (roles, tiers, fan-out cap, cost ceiling, result prefix, progress events, errors)
and delegate_to_model, on a real dev server with scripted parents and children."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from types import SimpleNamespace
from typing import Any

from temporalio.api.enums.v1 import EventType

from agent_tools._catalog.profiles import PROFILES
from agent_tools._catalog.registry import ToolCatalog
from agent_tools._session import SessionStatus
from agent_tools._settings import Price, Settings
from agent_tools.activities._delegation import plan_spawn
from agent_tools.contracts._delegation import Caller, PlanSpawnInput
from tests.support.fixture_types import Script, WorkerFor
from tests.support.sessions import collect_progress, tool_results


async def llm_max_tokens(client: Any, session_id: str) -> set[int | None]:
    """max_tokens of every model step the session scheduled, read from its history."""
    history = await client.temporal.get_workflow_handle(session_id).fetch_history()
    found: set[int | None] = set()
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = e.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "agent_tools.llm_step":
                found.add(json.loads(attrs.input.payloads[0].data)["max_tokens"])
    return found


def spawn(task: str, role: str | None = None, **extra: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"task": task, **extra}
    if role:
        args["role"] = role
    return {"name": "spawn_agent", "arguments": args}


async def test_spawn_runs_in_parallel_capped_per_message_with_prefixed_results_and_events(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    small = script(
        [
            {
                "match": {"role": "explore"},
                "turns": [{"say": "small explored {{last_user}}", "delay_seconds": 0.5}],
            },
            {"match": {"role": "summarize"}, "turns": [{"say": "small summary"}]},
        ]
    )
    large = script([{"match": {"role": "code"}, "turns": [{"say": "large wrote code"}]}])
    settings.model_tiers = {"small": small, "large": large}
    settings.model = script(
        [
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            spawn("t1"),
                            spawn("t2", "explore"),
                            spawn("t3", "code"),
                            spawn("t4", "summarize"),
                            spawn("t5", "explore"),
                        ]
                    },
                    {"say": "results:\n{{tool_results}}"},
                ],
            }
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT spawn", session_id="p-spawn")
        progress = asyncio.create_task(collect_progress(handle))
        result = await handle.result()
        assert result.status == SessionStatus.completed
        results = tool_results(await handle.transcript())
        assert results[0] == "SUB-AGENT[explore] RESULT: small explored t1"
        assert results[1] == "SUB-AGENT[explore] RESULT: small explored t2"
        assert results[2] == "SUB-AGENT[code] RESULT: large wrote code"
        assert results[3] == "SUB-AGENT[summarize] RESULT: small summary"
        assert json.loads(results[4]) == {"error": "delegation_fanout_capped", "cap": 4}
        assert result.tree_usage.calls == 4
        events = await asyncio.wait_for(progress, 10)
        started_ev = [e.data for e in events if e.kind == "subagent_started"]
        done_ev = [e.data for e in events if e.kind == "subagent_done"]
        # Concurrent, not one after the other: all four children started before the first one ended.
        kinds = [e.kind for e in events if e.kind.startswith("subagent")]
        assert kinds == ["subagent_started"] * 4 + ["subagent_done"] * 4
        assert sorted(e["role"] for e in started_ev) == ["code", "explore", "explore", "summarize"]
        assert {e["id"] for e in started_ev} == {e["id"] for e in done_ev}
        assert all(e["ok"] for e in done_ev)
        assert {e["preview"] for e in done_ev} >= {"large wrote code", "small summary"}
        assert next(e for e in started_ev if e["role"] == "code")["task"] == "t3"


async def test_spawned_children_never_spawn_and_steps_are_clamped(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "match": {"role": "explore"},
                "turns": [{"tool_calls": [spawn("grandchild")]}, {"say": "child saw: {{last_tool}}"}],
            },
            {
                "match": {"role": "summarize"},
                "turns": [{"tool_calls": [{"name": "todoWrite", "arguments": {"todos": []}}]}] * 5,
            },
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"tool_calls": [spawn("nested", "explore"), spawn("loop", "summarize", max_steps=50)]},
                    {"say": "done"},
                ],
            },
        ]
    )
    settings.default_max_tokens = 1000
    async with worker_for() as client:
        handle = await client.start_session("PARENT clamp", session_id="p-clamp")
        await handle.result()
        results = tool_results(await handle.transcript())
        # spawn_agent is removed from the child's tools: its call is an unknown tool.
        assert results[0].startswith("SUB-AGENT[explore] RESULT: child saw: Unknown tool 'spawn_agent'")
        # max_steps 50 is clamped to summarize's maximum of 3 steps.
        assert results[1] == "SUB-AGENT[summarize] RESULT: (stopped after the step budget of 3 steps for one turn)"
        assert (await client.session("p-clamp/sub-2").status()).steps == 3
        # Children answer with max_tokens 4096 whatever the deployment default (1000 here, the parent's).
        assert await llm_max_tokens(client, "p-clamp") == {1000}
        assert await llm_max_tokens(client, "p-clamp/sub-1") == {4096}


async def test_spawn_errors_invalid_arguments_failed_child_and_cost_ceiling(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "match": {"role": "verify"},
                "turns": [{"fail": {"status": 400, "message": "nope", "attempts": 99}}],
            },
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            spawn("x", "astrologer"),
                            {"name": "spawn_agent", "arguments": {"role": "explore"}},
                            spawn("check it", "verify"),
                        ]
                    },
                    {"say": "done"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT errors", session_id="p-err")
        await handle.result()
        results = [json.loads(r) for r in tool_results(await handle.transcript())]
        assert results[0]["error"] == "invalid_arguments" and "role" in results[0]["detail"]
        assert results[1]["error"] == "invalid_arguments" and "task" in results[1]["detail"]
        assert results[2]["error"] == "sub_agent_failed" and "nope" in results[2]["detail"]
        assert results[2]["id"] == "p-err/sub-1"


async def test_cost_ceiling_counts_the_whole_tree(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    child_script = script([{"match": {"role": "explore"}, "turns": [{"say": "expensive child"}]}])
    settings.model_tiers = {"small": child_script}
    settings.model = script(
        [
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"tool_calls": [spawn("a")]},
                    {"tool_calls": [spawn("b")]},
                    {"say": "{{tool_results}}"},
                ],
            },
        ]
    )
    # The parent's model is free; the child's costs 1 USD per token: after one child the tree is over 5 USD.
    settings.prices = {child_script: Price(input_per_mtok=1e6, output_per_mtok=1e6)}
    async with worker_for() as client:
        handle = await client.start_session("PARENT cost", session_id="p-cost")
        result = await handle.result()
        results = tool_results(await handle.transcript())
        assert results[0] == "SUB-AGENT[explore] RESULT: expensive child"
        ceiling = json.loads(results[1])
        assert ceiling["error"] == "request_cost_ceiling" and ceiling["ceiling_usd"] == 5.0
        assert ceiling["spent_usd"] >= 5.0
        assert result.tree_usage.cost_usd > 0 and result.usage.cost_usd < 5.0


async def test_plan_spawn_caps_tools_at_the_roles_level() -> None:
    catalog = ToolCatalog.builtin()
    services: Any = SimpleNamespace(catalog=catalog, settings=SimpleNamespace(model_tiers={"small": "scripted:s"}))
    caller = Caller(session_id="s", root_id="s", agent="a", project="default", model="scripted:parent")
    parent_tools = ["spawn_agent", "todoWrite", "subAgent"]
    summarize = await plan_spawn(services, PlanSpawnInput(session=caller, role="summarize", parent_tools=parent_tools))
    assert summarize.model == "scripted:s" and summarize.tools == ["todoWrite", "subAgent"]
    code = await plan_spawn(services, PlanSpawnInput(session=caller, role="code", parent_tools=parent_tools))
    # No "large" tier configured: the child runs on the parent's model.
    assert code.model == "scripted:parent" and code.tools == ["todoWrite", "subAgent"]


async def test_an_explore_child_gets_read_only_tools_only() -> None:
    """codai: explore is "read-only facts". Its child keeps the parent's readers (web, JSON, saved results,
    memory_recall, skills, a host tool declared read-only) and loses every tool that writes, calls a model
    or does what nobody declared: memory_remember, delegate_to_model, MCP tools, host tools, planning."""
    from agent_tools._user_tools import tool

    @tool(description="Look a ticket up", read_only=True)
    async def lookup(ticket: str) -> str:
        return ticket

    @tool(description="Close a ticket")
    async def close_ticket(ticket: str) -> str:
        return ticket

    catalog = ToolCatalog.builtin()
    mcp = dataclasses.replace(close_ticket.spec, name="mcp_files_write", capability="mcp")
    for spec in (lookup.spec, close_ticket.spec, mcp):
        catalog.register(spec)
    services: Any = SimpleNamespace(catalog=catalog, settings=SimpleNamespace(model_tiers={}))
    caller = Caller(session_id="s", root_id="s", agent="a", project="default", model="scripted:parent")
    parent_tools = [
        *PROFILES["codai"], "read_tool_result", "todoWrite", "createGoal", "saveMemory", "searchMemory",
        "lookup", "close_ticket", "mcp_files_write",
    ]  # fmt: skip
    explore = await plan_spawn(services, PlanSpawnInput(session=caller, role="explore", parent_tools=parent_tools))
    assert explore.tools == [
        "http_fetch", "json_query", "read_artifact", "memory_recall", "use_skill", "web_search", "web_fetch",
        "read_tool_result", "searchMemory", "lookup",
    ]  # fmt: skip
    research = await plan_spawn(services, PlanSpawnInput(session=caller, role="research", parent_tools=parent_tools))
    assert {"memory_remember", "delegate_to_model", "mcp_files_write", "close_ticket"} <= set(research.tools)


async def test_delegate_to_model(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    small = script([{"match": {"role": "delegate"}, "turns": [{"say": "small says {{last_user}}"}]}])
    settings.model_tiers = {"small": small}
    settings.model = script(
        [
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "delegate_to_model", "arguments": {"model": "small", "prompt": "2+2?"}},
                            {"name": "delegate_to_model", "arguments": {"model": "gpt-99", "prompt": "x"}},
                            {"name": "delegate_to_model", "arguments": {"model": "small"}},
                        ]
                    },
                    {"say": "done"},
                ],
            }
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT delegate", session_id="p-deleg")
        result = await handle.result()
        results = tool_results(await handle.transcript())
        ok = json.loads(results[0])
        assert ok["model"] == small and ok["content"] == "small says 2+2?" and ok["usage"]["calls"] == 1
        assert "not one you may call" in results[1] and "'small'" in results[1]
        assert json.loads(results[2])["error"] == "invalid_arguments"
        # The completion's usage is on the session's tree usage.
        assert result.tree_usage.calls == 1
