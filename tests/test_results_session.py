"""A real session (dev server, scripted model) that spills tool results and pages through them with every
reader; and the history cost of a 10 MB tool result."""

from __future__ import annotations

import json
from typing import Any

from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._user_tools import tool
from tests.support.fixture_types import Script, WorkerFor

ROWS = "\n".join(f"row {i}: status={'FAIL' if i == 4321 else 'ok'} detail={'z' * 40}" for i in range(6000))
DOC = {"results": [{"name": f"item{i}", "score": i / 10} for i in range(2000)], "count": 2000}


@tool(description="Returns a big report")  # type: ignore[untyped-decorator]
async def big_report() -> str:
    return ROWS


@tool(description="Returns a big JSON document")  # type: ignore[untyped-decorator]
async def big_json() -> dict[str, Any]:
    return DOC


@tool(description="Returns a payload of the given size")  # type: ignore[untyped-decorator]
async def payload(size: int) -> str:
    return ("0123456789abcdef" * (size // 16 + 1))[:size]


async def test_model_spills_and_pages_with_each_reader(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    def step(name: str, **arguments: Any) -> dict[str, Any]:
        return {"say": "", "tool_calls": [{"name": name, "arguments": arguments}]}

    settings.model = script(
        [
            step("big_report"),
            step("read_tool_result", ref="{{last_tool}}", offset=100, limit=3),
            step("search_tool_result", ref="{{last_tool}}", pattern=r"status=FAIL"),
            step("read_artifact", ref="{{last_tool}}", offset=0, max_chars=300),
            step("big_json"),
            step("query_tool_result", ref="{{last_tool}}", path=".results[7].name"),
            step("search_conversation_history", query="page through"),
            {"say": "done"},
        ]
    )
    tools = ["big_report", "big_json", "read_tool_result", "search_tool_result", "query_tool_result",
             "read_artifact", "search_conversation_history"]  # fmt: skip
    async with worker_for(tools=[big_report, big_json]) as client:
        handle = await client.start_session("Fetch the report and page through it", tools=tools)
        result = await handle.result()
        assert result.status == SessionStatus.completed and result.final_message == "done"
        entries = await handle.transcript()
    tool_msgs = [e for e in entries if e.role == "tool"]
    by_name = {e.name: e for e in tool_msgs}
    pointer = by_name["big_report"]
    assert pointer.artifact_ref and pointer.content.startswith("[Tool result saved: ")
    assert len(pointer.content) < 1500  # the model's copy is the pointer, not 300 KB

    read = by_name["read_tool_result"].content.splitlines()
    assert read[0] == f"[ref={pointer.artifact_ref}: lines 100-102 of 6,000; next offset=103]"
    assert read[1].startswith("row 100: ")
    search = json.loads(by_name["search_tool_result"].content)
    assert search["total_matches"] == 1 and search["matches"][0]["offset"] == 4321
    art = json.loads(by_name["read_artifact"].content)
    assert art["content"] == ROWS[:300] and art["next_offset"] == 300

    json_pointer = by_name["big_json"]
    assert json_pointer.artifact_ref and "JSON structure: object with keys: results, count" in json_pointer.content
    assert by_name["query_tool_result"].content.splitlines()[1] == '"item7"'
    history = json.loads(by_name["search_conversation_history"].content)
    assert history["matches"] and history["matches"][-1]["role"] == "user"
    assert all(not e.content.startswith("Tool ") for e in tool_msgs)  # no tool failed


async def _history_bytes(client: Any, size: int, script: Script, settings: Settings) -> int:
    handle = await client.start_session(f"payload of {size} bytes", tools=["payload"])
    result = await handle.result()
    assert result.status == SessionStatus.completed
    tool_msg = next(e for e in await handle.transcript() if e.role == "tool")
    if size > 2000:
        assert tool_msg.artifact_ref and f"[Tool result saved: {size:,} characters" in tool_msg.content
    else:
        assert tool_msg.artifact_ref is None and len(tool_msg.content) == size
    history = await handle.workflow.fetch_history()
    return sum(e.ByteSize() for e in history.events)


async def test_ten_megabyte_result_stays_out_of_history(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "match": {"prompt_contains": "payload of 10485760"},
                "turns": [{"tool_calls": [{"name": "payload", "arguments": {"size": 10_485_760}}]}, {"say": "ok"}],
            },
            {
                "match": {"prompt_contains": "payload of 10 bytes"},
                "turns": [{"tool_calls": [{"name": "payload", "arguments": {"size": 10}}]}, {"say": "ok"}],
            },
        ]
    )
    async with worker_for(tools=[payload]) as client:
        small = await _history_bytes(client, 10, script, settings)
        big = await _history_bytes(client, 10_485_760, script, settings)
    print(f"history bytes: 10 B result {small}, 10 MB result {big}, difference {big - small}")
    # Same conversation, same events: the 10 MB result costs only its pointer (header + 600-character preview).
    assert big - small < 4096, (small, big)


async def test_ref_from_an_earlier_run_tells_the_model_to_call_again(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Spill in turn 1, continue-as-new after it, and try the old ref in turn 2 (a new run)."""
    import asyncio

    settings.model = script(
        [
            {"tool_calls": [{"name": "big_report", "arguments": {}}]},
            {"say": "saved"},
            {"tool_calls": [{"name": "read_tool_result", "arguments": {"ref": "{{last_tool}}"}}]},
            {"say": "second: {{last_tool}}"},
        ]
    )
    tools = ["big_report", "read_tool_result"]
    async with worker_for(tools=[big_report]) as client:
        handle = await client.start_session(
            "first", tools=tools, keep_alive=True, options={"continue_as_new_after_turns": 1}
        )
        first_run = (await handle.workflow.describe()).run_id
        for _ in range(200):
            if (await handle.latest_message()).content == "saved":
                break
            await asyncio.sleep(0.05)
        await handle.send("second")
        for _ in range(200):
            latest = (await handle.latest_message()).content
            if latest.startswith("second: "):
                break
            await asyncio.sleep(0.05)
        second_run = (await handle.workflow.describe()).run_id
        await handle.stop("test done")
    assert first_run != second_run  # the session continued as new between the turns
    assert "belongs to an earlier run" in latest and "Call the tool that produced it (big_report) again" in latest
