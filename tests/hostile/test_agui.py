"""POST /agui with hostile input: bodies that are not RunAgentInput, deep and huge JSON, wrong types, NUL
bytes, cursors that are garbage or another session's, tool messages for calls that do not exist or with
answers that fit nothing. Each gets a 4xx with a reason (never a 500), and the session goes on."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from agent_tools._progress_resume import ProgressCursor
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor
from tests.support.hostile import task_failures
from tests.support.polling import eventually
from tests.support.session_api import ASK, FULL, READER, auth, run_agui, session_api


def _deep(levels: int) -> str:
    return '{"x":' * levels + "1" + "}" * levels


def _run(thread: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": "r1", "messages": messages, "state": {}, "tools": [], "context": [], **extra}


def _tool(call_id: str, content: str) -> dict[str, Any]:
    return {"id": "t1", "role": "tool", "toolCallId": call_id, "content": content}


def _cases(sid: str, ask_id: str) -> list[tuple[str, dict[str, Any], str, int]]:
    """(label, request options, key, status)."""
    user = {"id": "u1", "role": "user", "content": "hi"}
    new = f"agui-new-{uuid.uuid4().hex[:6]}"
    other = ProgressCursor.start("session-another").encode()
    return [
        ("not JSON", {"content": "{nope"}, FULL, 400),
        ("not an object", {"content": "[1]"}, FULL, 400),
        ("nested 5,000 levels", {"content": '{"threadId": ' + _deep(5000) + "}"}, FULL, 400),
        ("not RunAgentInput: no threadId", {"json": {"runId": "r", "messages": []}}, FULL, 422),
        ("not RunAgentInput: messages a string", {"json": {**_run(sid, []), "messages": "hi"}}, FULL, 422),
        (
            "not RunAgentInput: an unknown role",
            {"json": _run(sid, [{"id": "x", "role": "boss", "content": "a"}])},
            FULL,
            422,
        ),
        ("a huge body", {"content": '{"threadId": "' + "y" * 2_000_000 + '"}'}, FULL, 413),
        ("a thread id of 10,000 characters", {"json": _run("t" * 10_000, [user])}, FULL, 400),
        ("a new thread without a user message", {"json": _run(new, [])}, FULL, 422),
        ("a new thread with a huge prompt", {"json": _run(new, [{**user, "content": "p" * 200_000}])}, FULL, 422),
        ("a new thread, an agent of a wrong type", {"json": _run(new, [user], forwardedProps={"agent": 5})}, FULL, 422),
        (
            "a new thread, bad options",
            {"json": _run(new, [user], forwardedProps={"options": {"approval": 3}})},
            FULL,
            422,
        ),
        ("a new thread with a read-only key", {"json": _run(new, [user])}, READER, 403),
        ("a garbage cursor", {"json": _run(sid, [], state={"cursor": "garbage"})}, FULL, 400),
        ("another session's cursor", {"json": _run(sid, [], state={"cursor": other})}, FULL, 400),
        ("a tool message for no call", {"json": _run(sid, [_tool("call-nobody", "First")])}, FULL, 409),
        ("a tool message, a NUL in its id", {"json": _run(sid, [_tool("a\x00b", "First")])}, FULL, 409),
        ("a tool message for no sub-agent", {"json": _run(sid, [_tool("sub-999#x", "First")])}, FULL, 409),
        ("a sub-agent call of a NUL", {"json": _run(sid, [_tool("sub-1#\x00", "First")])}, FULL, 409),
        ("a sub-agent call id of 100,000", {"json": _run(sid, [_tool("sub-1#" + "x" * 100_000, "a")])}, FULL, 409),
        ("a sub-agent path 40 deep", {"json": _run(sid, [_tool("sub-1/" * 40 + "#x", "First")])}, FULL, 409),
        ("the root's ask id as a sub-agent's", {"json": _run(sid, [_tool(f"sub-1#{ask_id}", "First")])}, FULL, 409),
        ("a tool message from a read-only key", {"json": _run(sid, [_tool(ask_id, "First")])}, READER, 403),
        ("an answer nested 5,000 levels", {"json": _run(sid, [_tool(ask_id, _deep(5000))])}, FULL, 422),
        (
            "an answer nested 300 levels",
            {"json": _run(sid, [_tool(ask_id, '{"Which one?": ' + _deep(300) + "}")])},
            FULL,
            422,
        ),
        ("an answer to no such question", {"json": _run(sid, [_tool(ask_id, '{"Which two?": "First"}')])}, FULL, 409),
        ("an answer of 200,000 characters", {"json": _run(sid, [_tool(ask_id, "a" * 200_000)])}, FULL, 422),
        ("no API key", {"json": _run(sid, [])}, "", 401),
    ]


async def test_hostile_runs_get_a_clear_4xx_and_the_session_goes_on(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([{"say": "asking", "tool_calls": [ASK]}, {"say": "answered {{last_tool}}"}])
    sid = f"agui-{uuid.uuid4().hex[:8]}"
    async with worker_for() as client, session_api(settings, client) as http:
        first = await run_agui(http, _run(sid, [{"id": "u", "role": "user", "content": "go"}]), auth(FULL))
        [ask_id] = [e.data["toolCallId"] for e in first if e.type == "TOOL_CALL_START"]
        wrong = []
        for label, options, key, status in _cases(sid, ask_id):
            resp = await http.post("/agui", headers=auth(key) if key else {}, **options)
            detail = _detail(resp)
            if resp.status_code != status or not detail:
                wrong.append((label, resp.status_code, resp.text[:300]))
        assert wrong == [], "\n".join(map(str, wrong))

        # Nothing was lost: the question is still the one pending; a good answer goes through and ends it.
        async def pending() -> list[Any]:
            return await client.session(sid).pending_questions()

        assert [q.ask_id for q in await eventually(pending, timeout=10, what="the question")] == [ask_id]
        second = await run_agui(http, _run(sid, [_tool(ask_id, "First")], state={}), auth(FULL))
        assert second[-1].type == "RUN_FINISHED" and second[-1].data["result"]["status"] == "COMPLETED"
        result = await client.session(sid).result()
        assert result.status == SessionStatus.completed and "First" in (result.final_message or "")
        assert await task_failures(client.temporal, sid) == []


def _detail(resp: httpx.Response) -> Any:
    try:
        return resp.json().get("detail")
    except (ValueError, json.JSONDecodeError, AttributeError):
        return None
