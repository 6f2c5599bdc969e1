"""Goals, loops and todos end to end on real Temporal (time-skipping server for the hourly loops)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from agent_tools import AgentToolsPlugin
from agent_tools._client import SessionHandle
from agent_tools._session import SessionResult, SessionStatus
from agent_tools._settings import Settings
from agent_tools.contracts._planning import Goal, Loop, TodoItem
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.sessions import call, loops
from tests.support.temporal import running_worker, skip_time


def verdict(met: bool, reason: str) -> dict[str, Any]:
    return {"say": json.dumps({"met": met, "reason": reason})}


async def skipping_result(env: WorkflowEnvironment, handle: SessionHandle) -> SessionResult:
    async with env.time_skipping_unlocked():  # type: ignore[attr-defined]  # the test server's
        result: SessionResult = await handle.result()
    return result


async def current_details(handle: SessionHandle) -> str:
    """What the Temporal UI shows as the workflow's current details."""
    meta = await handle.workflow.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return str(meta.current_details)


async def goals(handle: SessionHandle) -> list[Goal]:
    result: list[Goal] = await handle.workflow.query("goals", result_type=list[Goal])
    return result


async def wait_loop(
    handle: SessionHandle, predicate: Callable[[list[Loop]], bool], timeout: float = 20.0
) -> list[Loop]:
    return await eventually(
        lambda: loops(handle),
        until=lambda current: bool(current) and predicate(current),
        ignoring=(Exception,),  # not started yet
        timeout=timeout,
        what="the loop condition",
    )


# ---- todos ---------------------------------------------------------------------------------------------


async def test_todo_write_replaces_the_list_and_accepts_several_in_progress(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """RTC sets no limit on in_progress items (its tip speaks of "in-progress ones"): two are accepted,
    stored and published; the result only hints that one at a time keeps the status bar clear."""
    todos = [
        {"content": "Search", "status": "completed"},
        {"content": "Write", "status": "in_progress", "active_form": "Writing"},
    ]
    two_active = [
        {"content": "a", "status": "in_progress"},
        {"content": "b", "status": "in_progress", "active_form": "Doing b"},
    ]
    settings.model = script(
        [
            {"tool_calls": [call("todoWrite", todos=[{"content": "Old", "status": "pending"}])]},
            {"tool_calls": [call("todoWrite", todos=todos)]},
            {"say": "{{last_tool}}"},
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("plan")
        seen: list[Any] = []

        async def follow() -> None:
            async for event in handle.progress():
                if event.kind == "todos":
                    seen.append(event.data["todos"])

        follower = asyncio.create_task(follow())
        result = await handle.result()
        # The follower ends once it has drained the closed run, which needs this worker to answer it.
        await asyncio.wait_for(follower, timeout=30)
        current = await handle.query("todos", list[TodoItem])
        assert [t.content for t in current] == ["Search", "Write"]  # full replacement
        assert "[~] Writing" in await current_details(handle)
        assert "in_progress" not in (result.final_message or "").split("\n")[0]  # one active: no hint

        settings.model = script([{"tool_calls": [call("todoWrite", todos=two_active)]}, {"say": "{{last_tool}}"}])
    async with worker_for() as client:
        handle = await client.start_session("plan two")
        second = await handle.result()
        answer = second.final_message or ""
        assert not answer.startswith("Invalid arguments"), answer
        assert answer.startswith("Todo list updated: 2 items, 0 completed.")
        assert "2 items are in_progress" in answer
        current = await handle.query("todos", list[TodoItem])
        assert [(t.content, t.status) for t in current] == [("a", "in_progress"), ("b", "in_progress")]
        assert "[~] a" in await current_details(handle) and "[~] Doing b" in await current_details(handle)
        history = await handle.workflow.fetch_history()
    assert [len(t) for t in seen] == [1, 2]
    # The run replays on the current code.
    await Replayer(workflows=[], plugins=[AgentToolsPlugin(Settings(agents_file=None))]).replay_workflow(history)


# ---- goals ---------------------------------------------------------------------------------------------


async def test_goal_judged_met_on_turn_3(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    settings.model = script(
        [
            {
                "match": {"agent": "goal-judge"},
                "turns": [
                    verdict(False, "1 of 3 files"),
                    verdict(False, "2 of 3 files"),
                    verdict(True, "3 files"),
                ],
            },
            {
                "turns": [
                    {
                        "tool_calls": [
                            call("createGoal", condition="three files written", max_turns=5),
                            call("createGoal", condition="a second goal"),
                        ]
                    },
                    {"say": "wrote file 1"},
                    {"say": "wrote file 2"},
                    {"say": "wrote file 3"},
                ]
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("write three files")
        result = await handle.result()
        assert result.status == SessionStatus.completed
        assert result.final_message == "wrote file 3"
        [goal] = await goals(handle)
        assert (goal.status, goal.completed_turns, goal.judgements, goal.reason) == (
            "completed",
            3,
            3,
            "3 files",
        )
        assert (await handle.status()).turns == 3
        assert result.usage.calls == 4 + 3  # four model steps, three judge calls
        entries = await handle.transcript()
        tool_texts = [e.content for e in entries if e.role == "tool"]
        assert any("goal-1 is already active" in t for t in tool_texts)  # one active goal at a time
        users = [e.content for e in entries if e.role == "user"]
        assert users[1].startswith("[Goal continuation goal-1] Keep working toward the goal: three files written")
        assert "1 of 3 files" in users[1]


async def test_goal_exhausted_at_max_turns_tells_the_user(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"agent": "goal-judge"}, "turns": [verdict(False, "not yet")], "repeat_last": True},
            {
                "turns": [
                    {"tool_calls": [call("createGoal", condition="the build is green", max_turns=2)]},
                    {"say": "working 1"},
                    {"say": "working 2"},
                    {"say": "Sorry: the build is still red after two attempts."},
                ]
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("make the build green")
        result = await handle.result()
        assert result.status == SessionStatus.completed
        assert result.final_message == "Sorry: the build is still red after two attempts."
        [goal] = await goals(handle)
        assert (goal.status, goal.completed_turns) == ("exhausted", 2)
        assert (await handle.status()).turns == 3
        users = [e.content for e in await handle.transcript() if e.role == "user"]
        assert users[-1].startswith("[System goal-1] The goal goal-1")
        assert "Tell the user where things stand" in users[-1]


async def test_complete_goal_by_the_agent_skips_the_judge(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"agent": "goal-judge"}, "turns": [verdict(False, "not yet")]},
            {
                "turns": [
                    {"tool_calls": [call("createGoal", condition="done twice")]},
                    {"say": "first"},
                    {
                        "tool_calls": [
                            call("completeGoal", goal_id="goal-1"),
                            call("cancelGoal", goal_id="goal-7"),
                        ]
                    },
                    {"say": "{{tool_results}}"},
                ]
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("do it twice")
        result = await handle.result()
        [goal] = await goals(handle)
        assert (goal.status, goal.judgements, goal.reason) == ("completed", 1, "completed by the agent")
        assert "Goal goal-1 marked as completed." in (result.final_message or "")
        assert "Unknown goal id 'goal-7'" in (result.final_message or "")


# ---- loops ---------------------------------------------------------------------------------------------


async def test_hourly_loop_runs_10_turns_and_ends_exhausted(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    settings.model = script(
        [
            {
                "turns": [
                    {"tool_calls": [call("createLoop", prompt="check the build", interval_seconds=3600)]},
                    {"say": "loop created"},
                    {"say": "build checked"},
                ],
                "repeat_last": True,
            }
        ]
    )
    # No workflow cache: every workflow task replays the history, so the scheduler must be deterministic.
    async with running_worker(time_skipping_env, settings, max_cached_workflows=0) as client:
        started = time.monotonic()
        handle = await client.start_session("watch the build")
        result = await skipping_result(time_skipping_env, handle)
        elapsed = time.monotonic() - started
        assert result.status == SessionStatus.completed
        [loop] = await loops(handle)
        assert (loop.status, loop.completed_turns, loop.ticks, loop.max_turns) == ("exhausted", 10, 10, 10)
        assert loop.reason == "reached max_turns (10)"
        span = datetime.fromisoformat(loop.last_run_at or "") - datetime.fromisoformat(loop.created_at)
        assert timedelta(hours=10) <= span < timedelta(hours=10, minutes=5)
        assert (await handle.status()).turns == 11
        users = [e.content for e in await handle.transcript() if e.role == "user"]
        assert users[1:] == ["[Scheduled loop loop-1] check the build"] * 10
        assert elapsed < 60


async def test_pause_and_resume_across_continue_as_new(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    settings.model = script(
        [
            {
                "turns": [
                    {
                        "tool_calls": [
                            call("createLoop", prompt="check", interval_seconds=3600, max_turns=3),
                            call("pauseLoop", loop_id="loop-42"),
                        ]
                    },
                    {"say": "created: {{tool_results}}"},
                    {"tool_calls": [call("pauseLoop", loop_id="loop-1")]},  # the first tick pauses its loop
                    {"say": "paused"},
                    {"tool_calls": [call("resumeLoop", loop_id="loop-1")]},  # a user message resumes it
                    {"say": "resumed"},
                    {"say": "checked"},
                ],
                "repeat_last": True,
            }
        ]
    )
    async with running_worker(time_skipping_env, settings) as client:
        handle = await client.start_session("check hourly", options={"continue_as_new_after_turns": 2})
        await wait_loop(handle, lambda ls: ls[0].status == "active")
        first_run = (await handle.workflow.describe()).run_id
        await skip_time(time_skipping_env, timedelta(hours=1, seconds=5))
        paused = await wait_loop(handle, lambda ls: ls[0].status == "paused")
        # Two turns done: the session continued as new, and the new run carries the paused loop.
        for _ in range(100):
            if (await handle.workflow.describe()).run_id != first_run:
                break
            await asyncio.sleep(0.1)
        assert (await handle.workflow.describe()).run_id != first_run
        assert (paused[0].completed_turns, paused[0].ticks, paused[0].next_run_at) == (1, 1, None)
        await skip_time(time_skipping_env, timedelta(hours=5))
        [still] = await loops(handle)
        assert (still.status, still.completed_turns, still.ticks) == ("paused", 1, 1)  # no tick while paused
        assert (await handle.status()).status == SessionStatus.idle  # waits: a paused loop is pending work
        await handle.send("resume the loop")
        result = await skipping_result(time_skipping_env, handle)
        assert result.status == SessionStatus.completed
        [loop] = await loops(handle)
        assert (loop.status, loop.completed_turns, loop.ticks) == ("exhausted", 3, 3)
        entries = await handle.transcript()
        assert "Unknown loop id 'loop-42'" in next(
            e.content for e in entries if e.role == "tool" and "loop-42" in e.content
        )


async def test_complete_loop_from_its_own_turn(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    settings.model = script(
        [
            {
                "turns": [
                    {
                        "tool_calls": [
                            call("createLoop", prompt="poll", interval_seconds=60, max_turns=5),
                            call("createLoop", prompt="daily digest", interval_seconds=86400, max_turns=3),
                        ]
                    },
                    {"say": "ok"},
                    {"say": "still red"},
                    {
                        "tool_calls": [
                            # Two live loops: without loop_id, completeLoop means the loop whose turn this is.
                            call("completeLoop", reason="build is green"),
                            call("cancelLoop", loop_id="loop-2"),
                            call("listLoops"),
                        ]
                    },
                    {"say": "{{tool_results}}"},
                ]
            }
        ]
    )
    async with running_worker(time_skipping_env, settings) as client:
        handle = await client.start_session("poll the build")
        result = await skipping_result(time_skipping_env, handle)
        assert result.status == SessionStatus.completed
        first, second = await loops(handle)
        assert (first.status, first.reason, first.completed_turns) == ("completed", "build is green", 2)
        assert (second.status, second.completed_turns, second.ticks) == ("cancelled", 0, 0)
        text = result.final_message or ""
        assert "Loop loop-1 completed: build is green" in text and "Loop loop-2 cancelled." in text
        listed = json.loads(text.splitlines()[-1])
        assert [(row["loop_id"], row["status"]) for row in listed] == [("loop-1", "completed"), ("loop-2", "cancelled")]


ASK_GO_ON = call(
    "askUser",
    questions=[
        {
            "question": "Go on?",
            "header": "Go",
            "options": [{"label": "yes", "description": "y"}, {"label": "no", "description": "n"}],
        }
    ],
)


async def start_loop_behind_a_question(env: Any, client: Any, max_turns: int) -> Any:
    """A session whose first turn creates a 60 s loop and then waits on askUser while 5 minutes pass."""

    handle = await client.start_session(f"poll while asking ({max_turns})")
    for _ in range(200):
        if await handle.pending_questions():
            break
        await asyncio.sleep(0.1)
    await skip_time(env, timedelta(minutes=5, seconds=5))
    return handle


def loop_script(max_turns: int) -> list[dict[str, Any]]:
    return [
        {
            "turns": [
                {
                    "tool_calls": [
                        call("createLoop", prompt="poll", interval_seconds=60, max_turns=max_turns),
                        ASK_GO_ON,
                    ]
                },
                {"say": "answered"},
                {"say": "polled"},
            ],
            "repeat_last": True,
        }
    ]


async def test_ticks_during_a_running_turn_wait_and_coalesce(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:

    settings.model = script(loop_script(max_turns=5))
    async with running_worker(time_skipping_env, settings) as client:
        handle = await start_loop_behind_a_question(time_skipping_env, client, 5)
        # Five intervals passed while the first turn still waits on the user: one tick queued, four coalesced.
        [loop] = await loops(handle)
        assert (loop.ticks, loop.coalesced_ticks, loop.completed_turns, loop.tick_pending) == (1, 4, 0, True)
        status = await handle.status()
        assert (status.turns, status.pending_inbox, status.status) == (1, 1, SessionStatus.waiting_for_user)
        await handle.answer_questions({"Go on?": "yes"})
        result = await skipping_result(time_skipping_env, handle)
        assert result.status == SessionStatus.completed
        [loop] = await loops(handle)
        assert (loop.status, loop.completed_turns, loop.ticks) == ("exhausted", 5, 5)
        assert (await handle.status()).turns == 6  # the user turn, then one turn per tick, never overlapping


async def test_loop_expires_when_its_turns_cannot_run(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:

    settings.model = script(loop_script(max_turns=2))
    async with running_worker(time_skipping_env, settings) as client:
        # Expiry is interval * max_turns * 2 = 4 minutes; the first turn blocks for 5.
        handle = await start_loop_behind_a_question(time_skipping_env, client, 2)
        [loop] = await loops(handle)
        assert (loop.status, loop.reason, loop.tick_pending) == ("exhausted", "expired after 0 of 2 turns", False)
        assert (await handle.status()).pending_inbox == 0  # its queued tick was dropped
        await handle.answer_questions({"Go on?": "no"})
        result = await skipping_result(time_skipping_env, handle)
        assert result.status == SessionStatus.completed
        assert (await handle.status()).turns == 1
