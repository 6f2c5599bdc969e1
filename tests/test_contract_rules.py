"""The documents' rules between tools and results, on the dev server with the scripted
model unless the rule is pure."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from sqlalchemy import text

from agent_tools._catalog import ToolCatalog
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._user_tools import tool
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.sessions import tool_results, turns

QUESTION = {
    "question": "Which one?",
    "header": "Pick",
    "options": [{"label": "a", "description": "A"}, {"label": "b", "description": "B"}],
}


async def test_unknown_parameters_and_string_booleans_are_refused(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 16: `webFetch {timeout: 999}` (an activity tool), `askUser` with `multiSelect: "yes"` (a workflow
    tool) and an unknown key inside a todo are refused with what is valid; a numeric string stays accepted."""
    settings.model = script(
        [
            {
                "tool_calls": [
                    {"name": "webFetch", "arguments": {"url": "https://a.example/", "prompt": "x", "timeout": 999}},
                    {"name": "askUser", "arguments": {"questions": [{**QUESTION, "multiSelect": "yes"}]}},
                    {"name": "todoWrite", "arguments": {"todos": [{"content": "x", "status": "pending", "due": 1}]}},
                    {"name": "createGoal", "arguments": {"condition": "done", "max_turns": "3"}},
                ]
            },
            {"say": "{{tool_results}}"},
        ]
    )
    async with worker_for() as client:
        # A bounded wait for answers: an askUser that was (wrongly) accepted must not hang the test.
        handle = await client.start_session(
            "go", tools=["webFetch", "askUser", "todoWrite", "createGoal"], options={"ask_user_timeout_seconds": 5}
        )
        result = await handle.result()
        results = tool_results(await handle.transcript())
    assert result.status == SessionStatus.completed
    assert results[0] == (
        "Invalid arguments for webFetch: (arguments): unknown parameter 'timeout'; valid parameters: url, prompt"
    )
    assert results[1] == "Invalid arguments for askUser: questions.0.multiSelect: must be true or false, not 'yes'"
    assert results[2].startswith("Invalid arguments for todoWrite: todos.0: unknown parameter 'due'; valid parameters:")
    assert "content, status, active_form" in results[2]
    assert "goal" in results[3].lower() and not results[3].startswith("Invalid")


def test_strict_check_reads_nested_optional_and_free_form_fields() -> None:
    catalog = ToolCatalog.builtin()
    wait = catalog.get("wait_for_event")
    assert wait is not None
    # `match` is free-form (additionalProperties): any key is the user's own.
    wait.validate_arguments({"kind": "ci", "match": {"anything": 1}})
    search = catalog.get("web_search")
    assert search is not None
    search.validate_arguments({"query": "x", "max_results": "3"})  # numeric strings stay coerced (documented)


async def test_running_results_are_json_and_the_latest_message_has_any_role(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 9: the async subAgent result is one JSON object (the hint is its `note`), so a script can read a
    key of it. Item 10: getSubAgentMessage on a child still in its first step reports the child's latest
    message, its instruction (role user), not "no messages"."""
    settings.model = script(
        [
            {"match": {"title": "Slow child"}, "turns": [{"say": "child done", "delay_seconds": 4}]},
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "subAgent", "arguments": {"title": "Slow child", "instruction": "INSTR"}}
                        ]
                    },
                    {
                        "delay_seconds": 1.5,
                        "tool_calls": [
                            {
                                "name": "getSubAgentMessage",
                                "arguments": {"sub_session_id": "p-json/sub-1"},
                            }
                        ],
                    },
                    {"say": "waiting"},
                    {"say": "notified"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("PARENT", session_id="p-json", tools=["subAgent", "getSubAgentMessage"])
        await handle.result()
        results = tool_results(await handle.transcript())
    latest = json.loads(results[1])
    assert latest["sub_session_id"] == "p-json/sub-1" and latest["sub_session_status"] == "running"
    assert latest["role"] == "user" and latest["content"] == "INSTR" and latest["message_id"] is not None
    started = json.loads(results[0])
    assert started["status"] == "running" and started["sub_session_id"] == "p-json/sub-1"
    assert "notification" in started["note"]


async def test_invoke_running_result_is_one_json_object(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 9: invoke_sub_agent's `"status": "running"` result parses as JSON, the resume hint in `note`."""
    from agent_tools._agents import AgentDefinition

    agents = [
        AgentDefinition(name="orch", subagents=["slow"], profile="fyai", tools=["invoke_sub_agent"]),
        AgentDefinition(name="slow", profile="fyai"),
    ]
    settings.model = script(
        [
            {"match": {"agent": "slow"}, "turns": [{"say": "slow done", "delay_seconds": 2}]},
            {
                "match": {"agent": "orch"},
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "invoke_sub_agent", "arguments": {"agent_name": "slow", "task_input": "t"}}
                        ]
                    },
                    {"say": "{{tool_results:invoke_sub_agent.status}}"},
                    {"say": "notified"},
                ],
            },
        ]
    )
    async with worker_for(agents=agents) as client:
        handle = await client.start_session(
            "go", agent="orch", session_id="p-inv-running", options={"delegation_invoke_wait_seconds": 1}
        )
        await handle.result()
        entries = await handle.transcript()
    running = json.loads(tool_results(entries)[0])
    assert running["status"] == "running" and running["execution_id"] == "p-inv-running/sub-1"
    assert "resume_execution_id" in running["note"]
    # The scripted model read one key of it, as a script or a model's JSON parser would.
    assert [e.content for e in entries if e.role == "assistant"][1] == "running"


async def test_send_message_reaches_only_async_sub_agents(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 12: a sub-agent may not message the root of its tree (nor any session that is not an async
    subAgent child); its parent's async children still take messages (tests/test_delegation.py)."""
    settings.model = script(
        [
            {
                "match": {"title": "Kid"},
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "sendMessageToSubAgent",
                                "arguments": {"sub_session_id": "p-root", "message": "hi"},
                            }
                        ]
                    },
                    {"say": "kid: {{last_tool}}"},
                ],
            },
            {
                "match": {"prompt_contains": "ROOT"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Kid", "instruction": "go"}}]},
                    {"say": "started"},
                    {"say": "root got: {{last_user}}"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("ROOT", session_id="p-root", tools=["subAgent", "sendMessageToSubAgent"])
        await handle.result()
        kid = await client.session("p-root/sub-1").result()
        root_turns = [e.content for e in await handle.transcript() if e.role == "user"]
    assert kid.final_message is not None and "root of the tree" in kid.final_message, kid.final_message
    assert not any("hi" == t for t in root_turns)


def test_message_target_rules() -> None:
    from agent_tools.contracts._delegation import ChildRecord, message_target_refusal

    def rec(face: Any, mode: Any) -> ChildRecord:
        return ChildRecord(session_id="c", face=face, agent="a", title="t", mode=mode, created_at="", updated_at="")

    assert message_target_refusal("c", "p", rec("subAgent", "async")) is None
    assert "a sync sub-agent" in (message_target_refusal("c", "p", rec("subAgent", "sync")) or "")
    assert "not started by subAgent" in (message_target_refusal("c", "p", rec("invoke_sub_agent", "bounded")) or "")
    assert "not started by subAgent" in (message_target_refusal("c", "p", None) or "")
    assert "root of the tree" in (message_target_refusal("c", None, None) or "")


# ---- saved results (items 7 and 8) ---------------------------------------------------------------------


@tool(description="A long text result")
async def long_text(size: int = 1500) -> str:
    return "line of text\n" * (size // 13 + 1)


@tool(description="A binary result")
async def png_bytes() -> bytes:
    return b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40


def _saved(text: str) -> bool:
    return text.startswith("[Tool result saved:")


async def test_binary_results_are_described_never_saved_nor_a_bytes_repr(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 8: a tool returning bytes (10 KB of PNG) is neither saved as an artifact nor shown as b'...'."""
    settings.model = script([{"tool_calls": [{"name": "png_bytes"}]}, {"say": "{{tool_results}}"}])
    async with worker_for(tools=[png_bytes]) as client:
        handle = await client.start_session("img", tools=["png_bytes"])
        result = await handle.result()
    assert result.final_message == "[image (image/png), 10,248 bytes: not shown to the model]"


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


@tool(description="An image as a data URL")
async def png_data_url() -> str:
    return PNG_URL


@tool(description="A result holding an image as a data URL")
async def chart(title: str = "sales") -> dict[str, Any]:
    return {"title": title, "chart": PNG_URL, "points": [1, 2, 3]}


@tool(description="An API's JSON text with an image in it (its slashes escaped)")
async def escaped_json() -> str:
    return '{"preview": "' + PNG_URL.replace("/", "\\/") + '", "ok": true}'


async def test_image_data_urls_are_images_never_saved(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """FYAI: "Images and binary results are never saved this way". A `data:image/...;base64,...` URL (13 KB
    of text here, far over the 2,000-character threshold) is an image whatever holds it: a plain string,
    a value inside a dict, an API's JSON text with escaped slashes. Each is described, nothing is saved."""
    described = "[image (image/png), 10,248 bytes: not shown to the model]"
    names = ["png_data_url", "chart", "escaped_json"]
    settings.model = script([{"tool_calls": [{"name": n} for n in names]}, {"say": "{{tool_results}}"}])
    async with worker_for(tools=[png_data_url, chart, escaped_json]) as client:
        handle = await client.start_session("img", tools=names)
        result = await handle.result()
        store = (await client.transcripts()).store
        async with store.engine.connect() as conn:
            saved = (await conn.execute(text("SELECT count(*) FROM artifacts"))).scalar_one()
    answer = result.final_message or ""
    assert "Tool result saved" not in answer and "base64" not in answer, answer[:300]
    assert answer.count(described) == 3, answer[:600]
    assert '"title": "sales"' in answer and '"points": [1, 2, 3]' in answer and '"ok": true' in answer
    assert saved == 0


def test_data_url_images_are_described_in_place() -> None:
    from agent_tools._spill import describe_data_images

    svg = "data:image/svg+xml;charset=utf-8;base64," + base64.b64encode(b"<svg/>").decode()
    assert (
        describe_data_images(f"see {svg} here") == "see [image (image/svg+xml), 6 bytes: not shown to the model] here"
    )
    plain = "data:text/plain;base64,aGVsbG8= and no image"
    assert describe_data_images(plain) == plain


async def test_one_to_one_chats_use_the_default_threshold_and_teams_their_own(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 8: FYAI's threshold is the team's setting; a one-to-one chat (no sub-agents) always uses 2,000."""
    from agent_tools._agents import AgentDefinition

    agents = [
        AgentDefinition(name="solo", profile=None, tools=["long_text"], spill_threshold_chars=300),
        AgentDefinition(name="lead", profile=None, tools=["long_text"], spill_threshold_chars=300, subagents=["solo"]),
    ]
    settings.model = script([{"tool_calls": [{"name": "long_text"}]}, {"say": "{{tool_results}}"}])
    async with worker_for(tools=[long_text], agents=agents) as client:
        solo = await (await client.start_session("a", agent="solo")).result()
        lead = await (await client.start_session("b", agent="lead")).result()
    assert solo.final_message is not None and not _saved(solo.final_message)  # 1,500 < 2,000: inline
    assert lead.final_message is not None and _saved(lead.final_message)  # 1,500 > the team's 300


async def test_a_sub_agent_uses_its_teams_threshold(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    """FYAI: a result is saved above "the team's Tool Summary Max Characters". A sub-agent is in its
    orchestrator's team: it uses the team's setting (the root's, 300 here), not one its own agent carries
    (5,000), and a team without a setting uses the default (2,000)."""
    from agent_tools._agents import AgentDefinition

    def agents(team_threshold: int | None) -> list[AgentDefinition]:
        return [
            AgentDefinition(
                name="lead",
                profile=None,
                tools=["invoke_sub_agent"],
                spill_threshold_chars=team_threshold,
                subagents=["helper"],
            ),
            AgentDefinition(name="helper", profile=None, tools=["long_text"], spill_threshold_chars=5000),
        ]

    settings.model = script(
        [
            {
                "match": {"agent": "lead"},
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "invoke_sub_agent", "arguments": {"agent_name": "helper", "task_input": "go"}}
                        ]
                    },
                    {"say": "{{tool_results}}"},
                ],
            },
            {
                "match": {"agent": "helper"},
                "turns": [{"tool_calls": [{"name": "long_text"}]}, {"say": "{{tool_results}}"}],
            },
        ]
    )
    for team, saved in ((300, True), (None, False)):
        async with worker_for(tools=[long_text], agents=agents(team)) as client:
            lead = await (await client.start_session("b", agent="lead")).result()
        answer = json.loads(lead.final_message or "{}")
        assert answer.get("status") == "completed", answer
        assert _saved(answer["output"]) is saved, (team, answer["output"][:200])


async def test_a_ref_from_an_earlier_turn_says_call_again_and_no_reader_no_names(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 8: a saved result read in a later turn of the same run tells the agent to call the tool again.
    Item 7: with the readers switched off for the organisation, the pointer names no reader."""
    settings.model = script(
        [
            {"tool_calls": [{"name": "long_text", "arguments": {"size": 5000}}]},
            {"tool_calls": [{"name": "read_tool_result", "arguments": {"ref": "{{tool_results:long_text}}"}}]},
            {"say": "first turn read"},
            {"tool_calls": [{"name": "read_tool_result", "arguments": {"ref": "{{tool_results:long_text}}"}}]},
            {"say": "{{tool_results}}"},
        ]
    )
    async with worker_for(tools=[long_text]) as client:
        handle = await client.start_session("go", tools=["long_text"], keep_alive=True, session_id="p-turns")
        await eventually(lambda: turns(handle, 1), timeout=15, what="handle idle after 1 turn")
        await handle.send("again")
        await eventually(lambda: turns(handle, 2), timeout=15, what="handle idle after 2 turns")
        results = tool_results(await handle.transcript())
        await handle.stop("done")
    assert _saved(results[0]) and "read_tool_result(ref=" in results[0]
    assert "line of text" in results[1] and "earlier turn" not in results[1]  # the same turn: readable
    assert "from an earlier turn" in results[2] and "Call the tool that produced it (long_text) again" in results[2]

    settings.org_disabled_tools = {"acme": ["read_tool_result", "search_tool_result", "query_tool_result"]}
    settings.model = script([{"tool_calls": [{"name": "long_text", "arguments": {"size": 5000}}]}, {"say": "x"}])
    async with worker_for(tools=[long_text]) as client:
        handle = await client.start_session("go", tools=["long_text"], organisation="acme")
        await handle.result()
        pointer = tool_results(await handle.transcript())[0]
    assert _saved(pointer) and "cannot be opened" in pointer
    assert not any(r in pointer for r in ("read_tool_result", "search_tool_result", "query_tool_result"))


async def test_create_loop_takes_short_intervals_above_the_configured_floor(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 15: RTC sets no minimum interval: a loop every 2 s runs (with the session's floor at 1 s),
    the default floor (5 s) refuses 3 s with the reason, and ticks that fall due during a busy turn coalesce
    (one turn per tick that could run, never a backlog)."""
    from tests.support.sessions import call, loops

    settings.model = script(
        [
            {
                "turns": [
                    {"tool_calls": [call("createLoop", prompt="poll", interval_seconds=2, max_turns=2)]},
                    {"say": "created"},
                    {"say": "slow poll", "delay_seconds": 2.5},  # the tick at 4 s falls due during this turn
                    {"say": "polled"},
                ],
                "repeat_last": True,
            }
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("go", tools=["createLoop"], options={"loop_min_interval_seconds": 1})
        result = await handle.result()
        [loop] = await loops(handle)
        status = await handle.status()
    assert result.status == SessionStatus.completed
    assert (loop.status, loop.completed_turns, loop.interval_seconds) == ("exhausted", 2, 2)
    assert loop.coalesced_ticks == 1 and status.turns == 3  # the user turn, then two loop turns

    settings.model = script(
        [{"tool_calls": [call("createLoop", prompt="poll", interval_seconds=3)]}, {"say": "{{tool_results}}"}]
    )
    async with worker_for() as client:
        refused = await (await client.start_session("go", tools=["createLoop"])).result()
    assert refused.final_message is not None and "at least 5" in refused.final_message


async def test_stopping_a_subtree_runs_no_turn_for_the_stopped_children(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Item 11: stopSubAgent on a middle session stops its leaf first; neither the middle (for its leaf's
    end) nor the root (for the middle it asked to stop) runs a model turn for those ends."""
    settings.model = script(
        [
            {"match": {"title": "Leaf"}, "turns": [{"say": "leaf done", "delay_seconds": 30}]},
            {
                "match": {"title": "Middle"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Leaf", "instruction": "wait"}}]},
                    {"say": "middle waiting"},
                    {"say": "MIDDLE EXTRA TURN"},
                ],
            },
            {
                "match": {"prompt_contains": "ROOT"},
                "turns": [
                    {"tool_calls": [{"name": "subAgent", "arguments": {"title": "Middle", "instruction": "go"}}]},
                    {"say": "started"},
                    {"tool_calls": [{"name": "stopSubAgent", "arguments": {"sub_session_id": "p-stop3/sub-1"}}]},
                    {"say": "stopped: {{last_tool}}"},
                    {"say": "ROOT EXTRA TURN"},
                ],
            },
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("ROOT", session_id="p-stop3", keep_alive=True)
        middle = client.session("p-stop3/sub-1")
        leaf = client.session("p-stop3/sub-1/sub-1")

        async def ready() -> bool:
            try:
                return (await leaf.status()).status == SessionStatus.running and await turns(middle, 1)
            except Exception:
                return False

        await eventually(ready, timeout=15, what="leaf running, middle after 1 turn")
        await handle.send("stop it")
        await eventually(lambda: turns(handle, 2), timeout=15, what="handle idle after 2 turns")
        middle_result = await middle.result()
        await asyncio.sleep(1.0)  # room for a (wrong) notification turn to start
        root_status = await handle.status()
        stopped = json.loads((await handle.latest_message()).content.removeprefix("stopped: "))
        middle_turns = (await middle.status()).turns
        await handle.stop("done")
    assert [s["sub_session_id"] for s in stopped["stopped_sessions"]] == ["p-stop3/sub-1/sub-1", "p-stop3/sub-1"]
    assert middle_result.status == SessionStatus.stopped and middle_result.final_message == "middle waiting"
    assert middle_turns == 1
    assert root_status.turns == 2 and root_status.pending_inbox == 0
