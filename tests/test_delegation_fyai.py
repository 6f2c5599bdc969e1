"""FYAI faces: invoke_sub_agent (grants, depth, repeats, bounded waits, resume, prior messages, model
override) and hand_off_to_agent, on a real dev server with scripted agents."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from temporalio.api.enums.v1 import EventType

from agent_tools._agents import AgentDefinition
from agent_tools._client import SessionHandle
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools.contracts._delegation import HandoffRecord
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.sessions import children, collect_progress, tool_results, turns

# FYAI: invoke_sub_agent and hand_off_to_agent are "assign it as a function" tools, not in the profile.
ASSIGNED = ["invoke_sub_agent", "hand_off_to_agent"]


async def timer_seconds(handle: SessionHandle) -> list[float]:
    history = await handle.workflow.fetch_history()
    return [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]


def invoke(agent: str, task: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": "invoke_sub_agent", "arguments": {"agent_name": agent, "task_input": task, **extra}}


def relay(agent: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "match": {"agent": agent},
        "turns": [{"tool_calls": calls}, {"say": f"{agent}: {{{{tool_results}}}}"}],
    }


async def test_invoke_grants_chain_depth_and_repeats(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    agents = [
        AgentDefinition(name="orch", subagents=["a2"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="a2", subagents=["a3", "orch"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="a3", subagents=["a4"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="a4", subagents=["a5"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="a5", subagents=["a6"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="a6", profile="fyai", tools=ASSIGNED),
    ]
    settings.model = script(
        [
            relay("orch", [invoke("a3", "skip a level"), invoke("a2", "go")]),
            relay("a2", [invoke("orch", "back to you"), invoke("a3", "go")]),
            relay("a3", [invoke("a4", "go")]),
            relay("a4", [invoke("a5", "go")]),
            relay("a5", [invoke("a6", "go")]),
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session("start", agent="orch", session_id="p-inv")
        result = await handle.result()
        assert result.status == SessionStatus.completed
        orch = tool_results(await handle.transcript())
        assert "not allowed to call sub-agent 'a3'" in orch[0] and "Grant 'a3' on the Sub-agents tab" in orch[0]
        # Without an override the bounded wait is FYAI's 4 minutes (the timer is cancelled when a2 answers).
        assert 240.0 in await timer_seconds(handle)
        a2 = tool_results(await client.session("p-inv/sub-1").transcript())
        assert "'orch' is already in the delegation chain orch -> a2" in a2[0]
        a5_id = "p-inv/sub-1/sub-1/sub-1/sub-1"
        a5 = tool_results(await client.session(a5_id).transcript())
        assert "orch -> a2 -> a3 -> a4 -> a5 is already 5 agents deep" in a5[0]
        status = await client.session(a5_id).status()
        assert status.depth == 4 and status.root_id == "p-inv" and status.parent_id == "p-inv/sub-1/sub-1/sub-1"
        # Each completed run is returned with its output and the messages to continue it later.
        completed = json.loads(orch[1])
        assert completed["status"] == "completed" and completed["execution_id"] == "p-inv/sub-1"
        assert completed["output"].startswith("a2: ")
        assert [m["role"] for m in completed["messages"]] == ["user", "assistant"]
        # Every model call of the chain is rolled up on the root: orch 2 + a2..a5 2 each.
        assert result.usage.calls == 2 and result.tree_usage.calls == 8


async def test_invoke_bounded_wait_resume_prior_messages_and_model_override(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    agents = [
        AgentDefinition(name="orch", subagents=["slow", "writer"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="slow", profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="writer", profile="fyai", tools=ASSIGNED),
    ]
    prior = [{"role": "user", "content": "my name is Bob"}, {"role": "assistant", "content": "hello Bob"}]
    alt = script([{"match": {"agent": "writer"}, "turns": [{"say": "unused"}, {"say": "alt writer: {{last_user}}"}]}])
    settings.model_tiers = {"alt": alt}
    settings.model = script(
        [
            {"match": {"agent": "slow"}, "turns": [{"say": "slow done", "delay_seconds": 1.5}]},
            {"match": {"agent": "writer"}, "turns": [{"say": "default writer"}]},
            {
                "match": {"agent": "orch"},
                "turns": [
                    {"tool_calls": [invoke("slow", "slow task")]},
                    {"tool_calls": [invoke("slow", resume_execution_id="p-b/sub-1")]},
                    {
                        "tool_calls": [
                            invoke(
                                "writer",
                                "what is my name?",
                                prior_messages=prior,
                                llm_config_override_id="alt",
                            )
                        ]
                    },
                    {"tool_calls": [invoke("writer", "x", llm_config_override_id="nope")]},
                    {"tool_calls": [invoke("slow", resume_execution_id="bogus")]},
                    {"say": "done"},
                ],
            },
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session(
            "start", agent="orch", session_id="p-b", options={"delegation_invoke_wait_seconds": 1}
        )
        result = await handle.result()
        assert result.status == SessionStatus.completed
        results = tool_results(await handle.transcript())
        running = json.loads(results[0])  # the whole result is one JSON object, the hint inside it
        assert running == {
            "status": "running",
            "execution_id": "p-b/sub-1",
            "agent_name": "slow",
            "messages": [],
            "note": "The sub-agent is still working: call invoke_sub_agent again with resume_execution_id to keep "
            "waiting.",
        }
        resumed = json.loads(results[1])
        assert resumed["status"] == "completed" and resumed["output"] == "slow done"
        assert resumed["messages"] == [
            {"role": "user", "content": "slow task"},
            {"role": "assistant", "content": "slow done"},
        ]
        written = json.loads(results[2])
        assert written["output"] == "alt writer: what is my name?"
        assert written["messages"] == [
            *prior,
            {"role": "user", "content": "what is my name?"},
            {"role": "assistant", "content": "alt writer: what is my name?"},
        ]
        writer_transcript = await client.session("p-b/sub-2").transcript()
        assert [(e.role, e.content) for e in writer_transcript][1:] == [
            ("user", "my name is Bob"),
            ("assistant", "hello Bob"),
            ("user", "what is my name?"),
            ("assistant", "alt writer: what is my name?"),
        ]
        assert "Unknown llm_config_override_id 'nope'" in results[3] and "'alt'" in results[3]
        assert "Unknown execution id 'bogus'" in results[4]
        # Only one run of slow was started: resuming waited on the same session.
        assert [c.session_id for c in await children(handle)] == ["p-b/sub-1", "p-b/sub-2"]


async def test_invoke_still_running_after_the_turn_notifies_the_orchestrator(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    agents = [
        AgentDefinition(name="orch", subagents=["slow"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="slow", profile="fyai", tools=ASSIGNED),
    ]
    settings.model = script(
        [
            {"match": {"agent": "slow"}, "turns": [{"say": "late answer", "delay_seconds": 1.0}]},
            {
                "match": {"agent": "orch"},
                "turns": [
                    {"tool_calls": [invoke("slow", "t")]},
                    {"say": "I will be told"},
                    {"say": "told: {{last_user}}"},
                ],
            },
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session(
            "start", agent="orch", session_id="p-late", options={"delegation_invoke_wait_seconds": 0.2}
        )
        result = await handle.result()
        assert result.final_message is not None and "late answer" in result.final_message
        assert "[Sub-agent notification p-late/sub-1]" in result.final_message


async def test_hand_off_continues_in_a_new_session_with_the_history(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    agents = [
        AgentDefinition(name="front", subagents=["billing"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="billing", subagents=["front"], profile="fyai", tools=ASSIGNED),
    ]
    settings.model = script(
        [
            {
                "match": {"agent": "front"},
                "turns": [
                    {
                        "say": "Let me transfer you",
                        "tool_calls": [
                            {
                                "name": "hand_off_to_agent",
                                "arguments": {"agent_name": "billing", "message": "refund please"},
                            }
                        ],
                    }
                ],
            },
            {
                "match": {"agent": "billing"},
                "turns": [
                    {"say": "unused: the history holds one assistant message"},
                    {"say": "billing: {{last_user}}"},
                    {
                        "tool_calls": [
                            {
                                "name": "hand_off_to_agent",
                                "arguments": {"agent_name": "front", "message": "back"},
                            }
                        ]
                    },
                    {"say": "b: {{last_tool}}"},
                ],
            },
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session("I want a REFUND", agent="front", session_id="p-hand", keep_alive=True)
        progress = asyncio.create_task(collect_progress(handle))
        result = await handle.result()
        events = await asyncio.wait_for(progress, 10)
        told = [e.data for e in events if e.kind == "status" and "handed_off_to" in e.data]
        assert told == [{"status": "handed_off", "handed_off_to": result.handed_off_to, "agent": "billing"}]
        assert result.status == SessionStatus.handed_off
        assert result.handed_off_to is not None and result.handed_off_to.startswith("session-")
        assert result.final_message == f"Handed off to billing (session {result.handed_off_to})."
        record = await handle.query("handoff", HandoffRecord)
        assert record.agent_name == "billing" and record.session_id == result.handed_off_to
        assert (await handle.status()).handed_off_to == result.handed_off_to
        assert (await handle.status()).status == SessionStatus.handed_off
        new = client.session(result.handed_off_to)
        await eventually(lambda: turns(new, 1), timeout=15, what="new idle after 1 turn")
        entries = await new.transcript()
        assert [(e.role, e.content) for e in entries][1:] == [
            ("user", "I want a REFUND"),
            ("assistant", "Let me transfer you"),
            ("user", "refund please"),
            ("assistant", "billing: refund please"),
        ]
        assert entries[2].tool_calls == []  # the hand-off call itself is not carried over unanswered
        new_status = await new.status()
        assert new_status.agent == "billing" and new_status.root_id == result.handed_off_to
        # A conversation is handed off only once.
        await new.send("send me back")
        await eventually(lambda: turns(new, 2), timeout=15, what="new idle after 2 turns")
        assert "already been handed off once" in (await new.latest_message()).content
        await new.stop()


async def test_two_hand_offs_in_one_step_start_one_session(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """FYAI: "A conversation can be handed off only once", also when the model asks twice in one step (its
    calls run in parallel): one specialist session starts, the other call is refused."""
    agents = [
        AgentDefinition(name="front", subagents=["billing", "support"], profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="billing", profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="support", profile="fyai", tools=ASSIGNED),
    ]
    hand = [
        {"name": "hand_off_to_agent", "arguments": {"agent_name": name, "message": "help"}}
        for name in ("billing", "support")
    ]
    settings.model = script(
        [
            {"match": {"agent": "front"}, "turns": [{"tool_calls": hand}]},
            {"turns": [{"say": "specialist here"}], "repeat_last": True},
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session("help me", agent="front", session_id="p-twice")
        progress = asyncio.create_task(collect_progress(handle))
        result = await handle.result()
        events = await asyncio.wait_for(progress, 10)
        assert result.status == SessionStatus.handed_off and result.handed_off_to is not None
        finished = [e.data for e in events if e.kind == "tool_finished"]
        assert sorted(e["is_error"] for e in finished) == [False, True], finished
        [refused] = [e["preview"] for e in finished if e["is_error"]]
        assert "already been handed off once" in refused
        [accepted] = [e["preview"] for e in finished if not e["is_error"]]
        assert result.handed_off_to in accepted
        # The refused call's target never got a session: only the accepted one exists.
        specialist = client.session(result.handed_off_to)
        assert (await specialist.result()).final_message == "specialist here"
        chosen = (await specialist.status()).agent
        assert chosen in ("billing", "support") and f"agent_name: {chosen};" in accepted


async def test_hand_off_refusals(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    agents = [
        AgentDefinition(
            name="front", subagents=["dormant", "front", "far"], profile="fyai", tools=[*ASSIGNED, "subAgent"]
        ),
        AgentDefinition(name="dormant", active=False, profile="fyai", tools=ASSIGNED),
        AgentDefinition(name="far", project="p2", profile="fyai", tools=ASSIGNED),
    ]

    def hand(agent: str) -> dict[str, Any]:
        return {"name": "hand_off_to_agent", "arguments": {"agent_name": agent, "message": "m"}}

    settings.model = script(
        [
            {
                "match": {"title": "Sub"},
                "turns": [{"tool_calls": [hand("dormant")]}, {"say": "sub: {{last_tool}}"}],
            },
            {
                "match": {"agent": "front"},
                "turns": [
                    {
                        "tool_calls": [
                            hand("dormant"),
                            hand("front"),
                            hand("stranger"),
                            hand("far"),
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Sub", "instruction": "i", "mode": "sync"},
                            },
                        ]
                    },
                    {"say": "done"},
                ],
            },
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session("hi", agent="front", session_id="p-refuse")
        result = await handle.result()
        assert result.status == SessionStatus.completed and result.handed_off_to is None
        results = tool_results(await handle.transcript())
        assert "Agent 'dormant' is not active" in results[0]
        assert "is the calling agent" in results[1]
        assert "may not hand off to 'stranger'" in results[2] and "Sub-agents tab" in results[2]
        assert "no agent named 'far' in project 'default'" in results[3]
        assert "only in one-to-one chats" in json.loads(results[4])["result"]


async def test_hand_off_refused_while_sub_agents_run(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    agents = [
        AgentDefinition(name="front", subagents=["billing"], profile="fyai", tools=[*ASSIGNED, "subAgent"]),
        AgentDefinition(name="billing", profile="fyai", tools=ASSIGNED),
    ]
    settings.model = script(
        [
            {"match": {"title": "Bg"}, "turns": [{"say": "bg done", "delay_seconds": 0.5}]},
            {
                "match": {"agent": "front"},
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "subAgent", "arguments": {"title": "Bg", "instruction": "b"}},
                            {"name": "hand_off_to_agent", "arguments": {"agent_name": "billing", "message": "m"}},
                        ]
                    },
                    {"say": "ok"},
                    {"say": "bg: {{last_user}}"},
                ],
            },
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session("hi", agent="front", session_id="p-busy")
        result = await handle.result()
        assert result.status == SessionStatus.completed and result.handed_off_to is None
        assert "still running" in tool_results(await handle.transcript())[1]
        assert result.final_message is not None and "bg done" in result.final_message
