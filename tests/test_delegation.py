"""RTC sub-agent faces and the child-session engine, on a real dev server with scripted parents and
children."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools.workflows._registry import all_workflows
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.sessions import children, collect_progress, tool_results, turns


async def assert_replays(handle: SessionHandle) -> None:
    """The recorded history replays on the current workflow code (determinism of the delegation paths)."""
    replayer = Replayer(workflows=all_workflows(), data_converter=pydantic_data_converter)
    await replayer.replay_workflow(await handle.workflow.fetch_history())


async def test_async_sub_agent_notifies_parent_and_rolls_up_usage(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Child A"}, "turns": [{"say": "child result 42"}]},
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Child A", "instruction": "compute it"},
                            }
                        ]
                    },
                    {"say": "waiting for the child"},
                    {"say": "parent got: {{last_user}}"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT start", session_id="p-async")
        progress = asyncio.create_task(collect_progress(handle))
        result = await handle.result()
        assert result.status == SessionStatus.completed
        # The notification arrived as its own turn, with the child's final message.
        assert result.final_message is not None
        assert result.final_message.startswith("parent got: [Sub-agent notification p-async/sub-1]")
        assert "child result 42" in result.final_message
        entries = await handle.transcript()
        started = json.loads(tool_results(entries)[0])  # one JSON object, the hint inside it
        assert started == {
            "sub_session_id": "p-async/sub-1",
            "title": "Child A",
            "mode": "async",
            "status": "running",
            "note": "The sub-agent runs in the background; you will receive a notification when it ends.",
        }
        child = await client.session("p-async/sub-1").result()
        assert child.status == SessionStatus.completed and child.final_message == "child result 42"
        # Usage of the child flows up into the parent's tree usage.
        assert result.tree_usage == child.usage
        assert result.tree_usage.calls == 1
        child_status = await client.session("p-async/sub-1").status()
        assert child_status.parent_id == "p-async" and child_status.root_id == "p-async" and child_status.depth == 1
        events = await asyncio.wait_for(progress, 10)
        kinds = [(e.kind, e.data.get("id")) for e in events if e.kind.startswith("subagent")]
        assert kinds == [("subagent_started", "p-async/sub-1"), ("subagent_done", "p-async/sub-1")]
        done = next(e for e in events if e.kind == "subagent_done")
        assert done.data["ok"] is True and done.data["preview"] == "child result 42"
        # The tree is listable through visibility (the child upserted its own search attributes).
        await eventually(lambda: _listed(client, "p-async", 2), timeout=15, what="2 sub-sessions listed under p-async")
        listed = {x.session_id: x for x in await client.list_sessions(root_id="p-async")}
        assert listed["p-async/sub-1"].parent_id == "p-async" and listed["p-async/sub-1"].depth == 1
        await assert_replays(handle)


async def _listed(client: AgentToolsClient, root: str, count: int) -> bool:
    return len(await client.list_sessions(root_id=root)) == count


async def test_sync_sub_agent_returns_result_without_notification(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Helper"}, "turns": [{"say": "helper says hi"}]},
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Helper", "instruction": "x", "mode": "sync"},
                            }
                        ]
                    },
                    {"say": "sync got: {{last_tool}}"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT go", session_id="p-sync")
        result = await handle.result()
        assert result.status == SessionStatus.completed
        assert result.final_message is not None
        got = json.loads(result.final_message.removeprefix("sync got: "))
        assert got == {
            "sub_session_id": "p-sync/sub-1",
            "title": "Helper",
            "mode": "sync",
            "status": "completed",
            "result": "helper says hi",
        }
        status = await handle.status()
        assert status.turns == 1  # no notification turn: the waiting call received the end itself


async def test_failed_children_report_failure_sync_and_async(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "match": {"title": "Broken"},
                "turns": [{"fail": {"status": 400, "message": "bad request", "attempts": 99}}],
            },
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Broken", "instruction": "x", "mode": "sync"},
                            },
                            {"name": "subAgent", "arguments": {"title": "Broken", "instruction": "y"}},
                        ]
                    },
                    {"say": "first done"},
                    {"say": "notified: {{last_user}}"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT fail", session_id="p-fail")
        result = await handle.result()
        entries = await handle.transcript()
        sync_result = json.loads(tool_results(entries)[0])
        assert sync_result["status"] == "failed" and "bad request" in sync_result["error"]
        assert result.final_message is not None
        assert "failed" in result.final_message and "bad request" in result.final_message


async def test_stop_sub_agent_stops_leaf_first_and_parent_is_not_told_of_a_crash(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Leaf"}, "turns": [{"say": "leaf slow", "delay_seconds": 30}]},
            {
                "match": {"title": "Middle"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Leaf", "instruction": "slow work"}}]},
                    {"say": "middle waiting"},
                ],
            },
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Middle", "instruction": "coordinate"},
                            }
                        ]
                    },
                    {"say": "started"},
                    {"tool_calls": [{"name": "listSubAgent"}]},
                    {"say": "list: {{last_tool}}"},
                    {
                        "tool_calls": [
                            {"name": "getSubAgentMessage", "arguments": {"sub_session_id": "p-stop/sub-1"}},
                            {"name": "getSubAgentMessage", "arguments": {"sub_session_id": "p-stop"}},
                            {"name": "getSubAgentMessage", "arguments": {"sub_session_id": "nobody"}},
                            {"name": "getSubAgentMessage", "arguments": {"sub_session_id": "p-other"}},
                        ]
                    },
                    {"say": "messages read"},
                    {"tool_calls": [{"name": "stopSubAgent", "arguments": {"sub_session_id": "p-stop/sub-1"}}]},
                    {"say": "stopped: {{last_tool}}"},
                    {
                        "tool_calls": [
                            {
                                "name": "sendMessageToSubAgent",
                                "arguments": {"sub_session_id": "p-stop/sub-1", "message": "hi"},
                            },
                            {
                                "name": "sendMessageToSubAgent",
                                "arguments": {"sub_session_id": "ghost", "message": "hi"},
                            },
                            {"name": "stopSubAgent", "arguments": {"sub_session_id": "p-stop/sub-1"}},
                        ]
                    },
                    {"say": "after"},
                ],
            },
            {"match": {"prompt_contains": "OTHER"}, "turns": [{"say": "other tree"}]},
        ]
    )
    async with worker_for() as client:
        other = await client.start_session("OTHER tree", session_id="p-other", keep_alive=True)
        handle = await client.start_session("PARENT stop", session_id="p-stop", keep_alive=True)
        middle = client.session("p-stop/sub-1")
        leaf = client.session("p-stop/sub-1/sub-1")

        async def tree_running() -> bool:
            try:
                recs = await children(middle)
                return bool(recs) and (await leaf.status()).status == SessionStatus.running
            except Exception:
                return False

        await eventually(tree_running, timeout=15, what="the tree running")
        await eventually(lambda: _status_is(middle, SessionStatus.idle), timeout=15, what="middle idle")
        await handle.send("list please")
        await eventually(lambda: turns(handle, 2), timeout=15, what="handle idle after 2 turns")
        listed = json.loads((await handle.latest_message()).content.removeprefix("list: "))
        by_id = {s["sub_session_id"]: s for s in listed}
        assert set(by_id) == {"p-stop/sub-1", "p-stop/sub-1/sub-1"}
        assert by_id["p-stop/sub-1"]["title"] == "Middle" and by_id["p-stop/sub-1"]["status"] == "idle"
        assert by_id["p-stop/sub-1/sub-1"]["status"] == "running"
        assert set(by_id["p-stop/sub-1"]) >= {"sub_session_id", "title", "status", "created_at", "updated_at"}
        await handle.send("read messages")
        await eventually(lambda: turns(handle, 3), timeout=15, what="handle idle after 3 turns")
        results = tool_results(await handle.transcript())[-4:]
        message = json.loads(results[0])
        assert message["sub_session_id"] == "p-stop/sub-1" and message["sub_session_title"] == "Middle"
        assert message["content"] == "middle waiting" and message["role"] == "assistant"
        assert message["sub_session_status"] == "idle" and message["message_id"] and message["created_at"]
        assert "current session itself" in results[1]
        assert "Unknown sub-session 'nobody'" in results[2]
        assert "not part of the current session tree" in results[3]
        await handle.send("stop it")
        await eventually(lambda: turns(handle, 4), timeout=15, what="handle idle after 4 turns")
        stopped = json.loads((await handle.latest_message()).content.removeprefix("stopped: "))
        assert stopped == {
            "stopped_sessions": [
                {"sub_session_id": "p-stop/sub-1/sub-1", "title": "Leaf"},
                {"sub_session_id": "p-stop/sub-1", "title": "Middle"},
            ],
            "total_stopped": 2,
        }
        assert (await leaf.result()).status == SessionStatus.stopped
        assert (await middle.result()).status == SessionStatus.stopped
        recs = await children(handle)
        assert recs[0].status == "stopped" and recs[0].finished
        # Finished and unknown targets get clear errors; stopping twice too.
        await handle.send("poke")
        await eventually(lambda: turns(handle, 5), timeout=15, what="handle idle after 5 turns")
        results = tool_results(await handle.transcript())[-3:]
        assert "has already finished (stopped); it takes no more messages" in results[0]
        assert "Unknown sub-session 'ghost'" in results[1]
        assert "has already finished (stopped)" in results[2]
        status = await handle.status()
        # The stop the parent asked for was not news: no notification turn was queued for it.
        assert status.turns == 5 and status.pending_inbox == 0
        await handle.stop()
        await other.stop()
        assert (await handle.result()).status == SessionStatus.stopped
        await assert_replays(handle)
        await assert_replays(middle)


async def _status_is(handle: SessionHandle, status: SessionStatus) -> bool:
    try:
        return (await handle.status()).status == status
    except Exception:
        return False


@pytest.mark.parametrize("how", ["stop", "cancel"])
async def test_stopping_a_parent_stops_its_tree_bottom_up(
    how: str, settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Leaf"}, "turns": [{"say": "leaf slow", "delay_seconds": 30}]},
            {
                "match": {"title": "Middle"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Leaf", "instruction": "slow"}}]},
                    {"say": "middle waiting"},
                ],
            },
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Middle", "instruction": "m", "mode": "sync"},
                            }
                        ]
                    },
                    {"say": "never"},
                ],
            },
        ]
    )
    root = f"p-tree-{how}"
    async with worker_for() as client:
        handle = await client.start_session("PARENT tree", session_id=root)
        leaf = client.session(f"{root}/sub-1/sub-1")
        await eventually(lambda: _status_is(leaf, SessionStatus.running), timeout=15, what="leaf running")
        if how == "stop":
            await handle.stop("enough")
            assert (await handle.result()).status == SessionStatus.stopped
        else:
            # Cancellation from outside: the session stops its subtree, then Temporal records the cancel.
            await handle.workflow.cancel()
            with pytest.raises(WorkflowFailureError):
                await handle.result()
        assert (await client.session(f"{root}/sub-1").result()).status == SessionStatus.stopped
        assert (await leaf.result()).status == SessionStatus.stopped
        recs = await children(handle)
        assert [r.status for r in recs] == ["stopped"]


async def test_send_message_to_running_async_sub_agent(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "match": {"title": "Worker"},
                "turns": [{"say": "first", "delay_seconds": 1.5}, {"say": "worker got: {{last_user}}"}],
            },
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Worker", "instruction": "work"}}]},
                    {
                        "tool_calls": [
                            {
                                "name": "sendMessageToSubAgent",
                                "arguments": {"sub_session_id": "p-msg/sub-1", "message": "EXTRA"},
                            }
                        ]
                    },
                    {"say": "sent: {{last_tool}}"},
                    {"say": "final: {{last_user}}"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT msg", session_id="p-msg")
        result = await handle.result()
        entries = await handle.transcript()
        delivered = json.loads(tool_results(entries)[1])
        assert delivered == {"sub_session_id": "p-msg/sub-1", "status": "delivered", "queued_behind": 0}
        assert result.final_message is not None and "worker got: EXTRA" in result.final_message
        child = client.session("p-msg/sub-1")
        assert (await child.status()).turns == 2


async def test_children_survive_parent_continue_as_new(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Slow"}, "turns": [{"say": "slow answer", "delay_seconds": 1.5}]},
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Slow", "instruction": "s"}}]},
                    {"say": "waiting"},
                    {"say": "after can: {{last_user}}"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session(
            "PARENT can", session_id="p-can", options={"continue_as_new_after_turns": 1}
        )
        result = await handle.result()
        assert result.status == SessionStatus.completed
        assert result.final_message is not None and "slow answer" in result.final_message
        # The child was awaited by the new run (the first one continued-as-new after its first turn).
        assert result.tree_usage.calls == 1
        runs = [w async for w in client.temporal.list_workflows("WorkflowId = 'p-can'")]
        assert len(runs) >= 2
        await assert_replays(handle)


async def test_any_session_in_the_tree_lists_and_reads_its_siblings(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Sibling"}, "turns": [{"say": "sibling busy", "delay_seconds": 1.5}]},
            {
                "match": {"title": "Lister"},
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "listSubAgent"},
                            {"name": "getSubAgentMessage", "arguments": {"sub_session_id": "p-list/sub-1"}},
                            {"name": "getSubAgentMessage", "arguments": {"sub_session_id": "p-list"}},
                        ]
                    },
                    {"say": "{{tool_results}}"},
                ],
            },
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Sibling", "instruction": "s"}}]},
                    {
                        "tool_calls": [
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Lister", "instruction": "l", "mode": "sync"},
                            }
                        ]
                    },
                    {"say": "listed"},
                    {"say": "end"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT list", session_id="p-list")
        await handle.result()
        lister = tool_results(await client.session("p-list/sub-2").transcript())
        listed = json.loads(lister[0])
        # The sibling is listed; neither the root nor the lister itself.
        assert [(s["sub_session_id"], s["title"], s["status"]) for s in listed] == [
            ("p-list/sub-1", "Sibling", "running")
        ]
        sibling = json.loads(lister[1])
        assert sibling["sub_session_title"] == "Sibling" and sibling["sub_session_status"] == "running"
        # Busy on its first step, its latest message is its instruction (RTC: the latest message, any role).
        assert sibling["message_id"] == "p-list/sub-1:1" and (sibling["role"], sibling["content"]) == ("user", "s")
        # The root shares the tree, so a sub-agent may read it too.
        assert json.loads(lister[2])["sub_session_id"] == "p-list"


async def test_tree_finishes_on_a_new_worker_after_the_first_one_stops(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Child"}, "turns": [{"say": "child answer", "delay_seconds": 1.0}]},
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Child", "instruction": "c"}}]},
                    {"say": "waiting"},
                    {"say": "got: {{last_user}}"},
                ],
            },
        ]
    )
    options = {"heartbeat_timeout_seconds": 2}
    async with worker_for() as client:
        await client.start_session("PARENT restart", session_id="p-restart", options=options)
        await eventually(
            lambda: _status_is(client.session("p-restart/sub-1"), SessionStatus.running),
            timeout=15,
            what="sub-1 running",
        )
    # The first worker is gone mid-child; a fresh one (no cached workflow state) replays and carries on.
    async with worker_for() as client:
        result = await client.session("p-restart").result()
        assert result.status == SessionStatus.completed
        assert result.final_message is not None and "child answer" in result.final_message
        assert result.tree_usage.calls >= 1
