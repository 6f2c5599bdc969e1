"""POST /agui against a real dev server and worker: text streamed as AG-UI text events while the model
writes, tool calls and their results, todos as state; askUser and tool approvals as frontend tool calls
answered by a second run's tool message; and the mapping of progress items to AG-UI events on its own."""

from __future__ import annotations

import json
import uuid
from typing import Any

from agent_tools._activity_io import ProgressEvent
from agent_tools._service.agui_events import AguiMapper
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor
from tests.support.session_api import ASK, FULL, READER, TODO, AguiEvent, auth, run_agui, session_api, sub_agent_asks

WORDS = " ".join(f"word{i}" for i in range(40))


def _input(thread: str, messages: list[dict[str, Any]], state: Any = None, **props: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"threadId": thread, "runId": uuid.uuid4().hex, "messages": messages, "tools": []}
    body["context"] = []
    body["state"] = state if state is not None else {}
    body["forwardedProps"] = props
    return body


def _user(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "role": "user", "content": text}


def _tool(call_id: str, content: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "role": "tool", "toolCallId": call_id, "content": content}


def _types(events: list[AguiEvent]) -> list[str]:
    return [e.type for e in events]


def _text(events: list[AguiEvent]) -> str:
    return "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")


def _frontend_calls(events: list[AguiEvent]) -> list[AguiEvent]:
    """The askUser and approveToolCall calls a run leaves for the frontend."""
    names = ("askUser", "approveToolCall")
    return [e for e in events if e.type == "TOOL_CALL_START" and e.data["toolCallName"] in names]


def _state(events: list[AguiEvent]) -> dict[str, Any]:
    """The state a client holds after the run: the snapshot with the deltas' ``add`` operations applied."""
    state: dict[str, Any] = {}
    for e in events:
        if e.type == "STATE_SNAPSHOT":
            state = json.loads(json.dumps(e.data["snapshot"]))
        elif e.type == "STATE_DELTA":
            for op in e.data["delta"]:
                assert op["op"] == "add"
                *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
                target = state
                for p in parents:
                    target = target[p]
                target[last] = op["value"]
    return state


# The mapping, without a server.


def _item(kind: str, **data: Any) -> ProgressEvent:
    return ProgressEvent(kind=kind, session_id="s", data=data)  # type: ignore[arg-type]


def _kinds(events: list[Any]) -> list[str]:
    return [str(e.type.value) for e in events]


def test_streamed_text_is_one_message_however_the_step_was_retried() -> None:
    m = AguiMapper("s")
    out = [
        *m.feed(_item("text_delta", position=1, attempt=1, offset=0, text="Hel"), 0),
        *m.feed(_item("text_delta", position=1, attempt=1, offset=0, text="Hello"), 1),
        *m.feed(_item("text_discard", position=1, attempt=2), 2),
        *m.feed(_item("text_delta", position=1, attempt=2, offset=0, text="Hi"), 3),
        *m.feed(_item("text_delta", position=1, attempt=1, offset=5, text=" late"), 4),
        *m.feed(_item("assistant_message", position=1, content="Hi there"), 5),
    ]
    assert _kinds(out) == [
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "CUSTOM",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
    ]
    first, second = out[0].message_id, out[5].message_id  # type: ignore[attr-defined]
    assert first != second and out[4].value == {"messageId": first, "text": "Hello"}  # type: ignore[attr-defined]
    assert "".join(e.delta for e in out[6:8]) == "Hi there"  # type: ignore[attr-defined]
    assert m.message_id is None and not m.waiting


def test_tools_questions_approvals_todos_and_subagents_map_to_their_events() -> None:
    m = AguiMapper("s")
    call = m.feed(_item("tool_started", tool="readFile", call_id="c1", arguments={"path": "a"}), 0)
    assert _kinds(call) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert call[0].tool_call_name == "readFile" and json.loads(call[1].delta) == {"path": "a"}  # type: ignore[attr-defined]
    [result] = m.feed(_item("tool_finished", tool="readFile", call_id="c1", preview="text of a"), 1)
    assert result.tool_call_id == "c1" and result.content == "text of a"  # type: ignore[attr-defined]
    # askUser is the frontend's call: its engine-side start and end show as nothing, its question as the call.
    assert m.feed(_item("tool_started", tool="askUser", call_id="a1", arguments={}), 2) == []
    ask = m.feed(_item("question", ask_id="a1", questions=ASK["arguments"]["questions"]), 3)  # type: ignore[index]
    assert ask[0].tool_call_name == "askUser" and ask[0].tool_call_id == "a1"  # type: ignore[attr-defined]
    assert json.loads(ask[1].delta) == ASK["arguments"] and m.pending_calls == ["a1"]  # type: ignore[attr-defined]
    approval = m.feed(_item("approval", state="pending", approval_id="p1", tool="rm", digest="sha256:x"), 4)
    assert approval[0].tool_call_name == "approveToolCall" and m.pending_calls == ["a1", "p1"]  # type: ignore[attr-defined]
    assert m.feed(_item("approval", state="approved", approval_id="p1"), 5) == []
    [todos] = m.feed(_item("todos", todos=[{"content": "x", "status": "pending"}]), 6)
    assert todos.model_dump(mode="json")["delta"] == [
        {"op": "add", "path": "/todos", "value": [{"content": "x", "status": "pending"}]}
    ]
    [child] = m.feed(_item("subagent_started", id="s/sub-1", title="Child", task="t"), 7)
    assert child.model_dump(mode="json")["delta"][0]["path"] == "/subagents/s~1sub-1"
    # A sub-agent's own text is not the thread's message.
    sub = ProgressEvent(kind="text_delta", session_id="s/sub-1", data={"position": 1, "offset": 0, "text": "x"})
    assert m.feed(sub, 0) == []
    [done] = m.feed(_item("subagent_done", id="s/sub-1", status="completed", role="r", preview="p"), 8)
    assert done.model_dump(mode="json")["delta"][0]["value"]["status"] == "completed"
    assert _kinds(m.finish("cur")) == ["STATE_DELTA"]


def test_a_call_id_names_the_session_of_the_tree_and_its_item() -> None:
    from agent_tools._service.tree_pending import call_id, target_of

    root = "t#1/x"  # a root id may hold the separators itself
    named = [(root, "call_a"), (root, "sub-1#b"), (root, "#c"), (f"{root}/sub-1", "c#d"), (f"{root}/sub-2/sub-10", "e")]
    for session, item in named:
        assert target_of(root, call_id(root, session, item)) == (session, item)
    assert call_id(root, f"{root}/sub-2/sub-10", "e") == "sub-2/sub-10#e"
    assert call_id(root, root, "apr_1") == "apr_1"
    # Only a sub-agent path names a sub-agent; anything else is one of the root's own ids.
    for other in ("sub-x#a", "sub-1#", "sub-1/#a", "/sub-1#a", "sub-1" + "/sub-1" * 40 + "#a"):
        assert target_of(root, other) == (root, other)
    m = AguiMapper(root)
    question = ProgressEvent(kind="question", session_id=f"{root}/sub-3", data={"ask_id": "q1", "questions": []})
    [start, *_] = m.feed(question, 4)
    assert start.tool_call_id == "sub-3#q1" and m.pending_calls == ["sub-3#q1"]  # type: ignore[attr-defined]


# Against a real server and worker.


async def test_a_run_streams_text_tool_calls_and_todos_then_finishes(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [{"say": "planning", "tool_calls": [TODO]}, {"say": WORDS + " " + WORDS, "word_seconds": 0.03}]
    )
    thread = f"agui-{uuid.uuid4().hex[:8]}"
    async with worker_for() as client, session_api(settings, client, poll_seconds=0.05) as http:
        events = await run_agui(http, _input(thread, [_user("write")]), auth(FULL))
        types = _types(events)
        assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
        assert events[0].data["threadId"] == thread
        assert events[-1].data["result"]["status"] == "COMPLETED", [
            e.data for e in events if e.type not in ("TEXT_MESSAGE_CONTENT",)
        ]
        start = types.index("TOOL_CALL_START")
        assert events[start].data["toolCallName"] == "todoWrite"
        assert types[start : start + 3] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
        assert "TOOL_CALL_RESULT" in types[start:]
        assert [(t["content"], t["status"]) for t in _state(events)["todos"]] == [("write it", "in_progress")]
        # The long reply arrived in pieces while the model wrote it (about 2.4 s), not all at its end.
        last = max(i for i, t in enumerate(types) if t == "TEXT_MESSAGE_START")
        end = types.index("TEXT_MESSAGE_END", last)
        contents = [e for e in events[last:end] if e.type == "TEXT_MESSAGE_CONTENT"]
        assert len(contents) >= 5 and events[end].at - contents[0].at > 1.0
        assert _text(events) == "planning" + WORDS + " " + WORDS
        assert types.count("TEXT_MESSAGE_START") == types.count("TEXT_MESSAGE_END") == 2
        assert (await client.session(thread).status()).status == "completed"


async def test_ask_user_is_a_frontend_tool_call_answered_by_the_next_run(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([{"say": "asking", "tool_calls": [ASK]}, {"say": "answered {{last_tool}}"}])
    thread = f"agui-{uuid.uuid4().hex[:8]}"
    async with worker_for() as client, session_api(settings, client) as http:
        first = await run_agui(http, _input(thread, [_user("go")]), auth(FULL))
        types = _types(first)
        assert types[-1] == "RUN_FINISHED" and first[-1].data["result"]["status"] == "waiting"
        [call] = [e for e in first if e.type == "TOOL_CALL_START"]
        assert call.data["toolCallName"] == "askUser"
        call_id = call.data["toolCallId"]
        args = next(e for e in first if e.type == "TOOL_CALL_ARGS")
        assert json.loads(args.data["delta"])["questions"][0]["question"] == "Which one?"
        assert first[-1].data["outcome"] == {"type": "success", "pendingToolCallIds": [call_id]}

        # A reconnect that answers nothing shows the waiting call again, and the session still waits.
        state = _state(first)
        assert state["cursor"]
        history = [
            _user("go"),
            {
                "id": "m1",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "askUser", "arguments": args.data["delta"]},
                    }
                ],
            },
        ]
        again = await run_agui(http, _input(thread, history, state), auth(READER))
        assert [e.data["toolCallId"] for e in again if e.type == "TOOL_CALL_START"] == [call_id]
        assert again[-1].data["result"]["status"] == "waiting"

        answer = {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "second"}
        second = await run_agui(http, _input(thread, [*history, answer], state), auth(FULL))
        assert second[-1].type == "RUN_FINISHED", second[-1].data
        assert second[-1].data["result"]["status"] == "COMPLETED"
        text = _text(second)
        assert "answered" in text and "Second" in text and "asking" not in text  # from the cursor on only
        result = await client.session(thread).result()
        assert "Second" in str(result.final_message)


async def test_a_tool_approval_is_a_frontend_tool_call_too(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([{"tool_calls": [TODO]}, {"say": "listed"}])
    thread = f"agui-{uuid.uuid4().hex[:8]}"
    options = {"approval": {"require": ["todoWrite"]}}
    async with worker_for() as client, session_api(settings, client) as http:
        first = await run_agui(http, _input(thread, [_user("go")], options=options), auth(FULL))
        [call] = [e for e in first if e.type == "TOOL_CALL_START" and e.data["toolCallName"] == "approveToolCall"]
        args = json.loads(
            next(
                e.data["delta"]
                for e in first
                if e.data.get("toolCallId") == call.data["toolCallId"] and e.type == "TOOL_CALL_ARGS"
            )
        )
        assert args["tool"] == "todoWrite" and len(args["digest"]) == 64
        stale = json.dumps({"approve": True, "digest": "0" * 64})
        refused = await http.post(
            "/agui",
            json=_input(thread, [_tool(call.data["toolCallId"], stale)], _state(first)),
            headers=auth(FULL),
        )
        assert refused.status_code == 409 and "digest" in refused.json()["detail"], refused.text
        garbled = await http.post(
            "/agui", json=_input(thread, [_tool(call.data["toolCallId"], "maybe")]), headers=auth(FULL)
        )
        assert garbled.status_code == 422, garbled.text
        answer = _tool(call.data["toolCallId"], "approve")
        second = await run_agui(http, _input(thread, [_user("go"), answer], _state(first)), auth(FULL))
        assert second[-1].data["result"]["status"] == "COMPLETED", _types(second)
        assert [t["content"] for t in _state(second)["todos"]] == ["write it"]
        assert "listed" in _text(second)
        assert (await client.session(thread).status()).status == "completed"


async def test_a_failed_read_goes_on_from_the_last_cursor_and_gives_up_after_failing_for_a_while() -> None:
    import time
    from datetime import timedelta

    from agent_tools._progress_resume import ResumableItem
    from agent_tools._service.follow import follow

    class Flaky:
        """A handle whose reads fail after each item, ``fails`` times in all."""

        def __init__(self, fails: int) -> None:
            self.fails = fails
            self.starts: list[str | None] = []

        async def resumable_progress(self, cursor: str | None, *, poll: timedelta) -> Any:
            self.starts.append(cursor)
            n = 0 if cursor is None else int(cursor)
            if n < 3:
                yield ResumableItem(str(n + 1), n, _item("todos", todos=[]))
            if self.fails > 0:
                self.fails -= 1
                raise RuntimeError("poll failed")

    handle = Flaky(fails=2)
    got = [i.offset async for batch in follow(handle, None, poll=0.01, keepalive=5.0) for i in batch or []]
    assert got == [0, 1, 2] and handle.starts == [None, "1", "2"]
    # Failing for a second in a row is ridden out (an overloaded server), for longer it ends the stream.
    shaky = Flaky(fails=4)
    items = [i async for i in follow(shaky, "3", poll=0.01, keepalive=5.0, retry_seconds=30) if i]
    assert items == [] and len(shaky.starts) == 5
    stuck = Flaky(fails=100)
    began = time.monotonic()
    try:
        [item async for item in follow(stuck, "3", poll=0.01, keepalive=5.0, retry_seconds=1.0)]
    except RuntimeError:
        assert 1.0 <= time.monotonic() - began < 5 and 2 <= len(stuck.starts) <= 5
    else:
        raise AssertionError("a read that keeps failing must end the run")


def test_the_openapi_document_says_the_agui_route() -> None:
    from agent_tools._service.app import create_app

    doc = create_app(Settings()).openapi()
    op = doc["paths"]["/agui"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AgUiRunAgentInput"
    }
    assert {"threadId", "runId", "messages", "state"} <= set(
        doc["components"]["schemas"]["AgUiRunAgentInput"]["properties"]
    )
    assert "text/event-stream" in op["responses"]["200"]["content"]
    assert op["security"] == [{"HTTPBearer": []}] and {"401", "403", "409", "422"} <= set(op["responses"])
    assert "#/$defs/" not in json.dumps(doc)


async def test_a_sub_agents_question_and_approval_are_frontend_calls_answered_to_it(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """A sync sub-agent asks, then needs an approval: each reaches the thread as a frontend call whose id
    names the sub-agent, a reconnect shows it again, and the tool message's answer goes to the sub-agent."""
    turns, agent = sub_agent_asks()
    settings.model = script(turns)
    thread = f"agui-{uuid.uuid4().hex[:8]}"
    child = f"{thread}/sub-1"
    async with worker_for(agents=[agent]) as client, session_api(settings, client) as http:
        first = await run_agui(http, _input(thread, [_user("go")]), auth(FULL))
        assert first[-1].type == "RUN_FINISHED" and first[-1].data["result"]["status"] == "waiting", _types(first)
        [ask] = _frontend_calls(first)
        ask_id = ask.data["toolCallId"]
        [pending] = await client.session(child).pending_questions()
        assert ask.data["toolCallName"] == "askUser" and ask_id == f"sub-1#{pending.ask_id}"
        assert first[-1].data["outcome"]["pendingToolCallIds"] == [ask_id]
        assert _state(first)["subagents"][child]["status"] == "running"

        again = await run_agui(http, _input(thread, [_user("go")], _state(first)), auth(READER))
        assert [e.data["toolCallId"] for e in _frontend_calls(again)] == [ask_id]
        args = next(e for e in again if e.type == "TOOL_CALL_ARGS" and e.data["toolCallId"] == ask_id)
        assert json.loads(args.data["delta"])["questions"][0]["question"] == "Which one?"

        second = await run_agui(http, _input(thread, [_tool(ask_id, "second")], _state(first)), auth(FULL))
        [approval] = _frontend_calls(second)
        [waiting] = await client.session(child).pending_approvals()
        assert approval.data["toolCallName"] == "approveToolCall"
        assert approval.data["toolCallId"] == f"sub-1#{waiting.approval_id}"
        assert second[-1].data["outcome"]["pendingToolCallIds"] == [approval.data["toolCallId"]]
        approval_args = json.loads(
            next(
                e.data["delta"]
                for e in second
                if e.type == "TOOL_CALL_ARGS" and e.data["toolCallId"] == approval.data["toolCallId"]
            )
        )
        assert approval_args["session_id"] == child and approval_args["tool"] == "todoWrite"
        # The root itself waits on nothing a person answers: the calls are the sub-agent's.
        assert await client.session(thread).pending_questions() == []
        assert await client.session(thread).pending_approvals() == []

        answer = _tool(approval.data["toolCallId"], "approve")
        third = await run_agui(http, _input(thread, [answer], _state(second)), auth(FULL))
        assert third[-1].type == "RUN_FINISHED" and third[-1].data["result"]["status"] == "COMPLETED", _types(third)
        assert "parent got" in _text(third)
        child_result = await client.session(child).result()
        assert child_result.status == "completed"
        [entry] = [e for e in await client.session(child).transcript() if e.role == "tool" and e.name == "askUser"]
        assert "Second" in entry.content
        # An answer to a call that is no longer pending is refused, not sent anywhere.
        late = await http.post("/agui", json=_input(thread, [_tool(ask_id, "first")]), headers=auth(FULL))
        assert late.status_code == 409, late.text


async def test_two_clients_on_one_thread_each_see_every_delta_and_one_answer_finishes_both(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Two AG-UI runs and two event-stream readers follow one session at once: each gets every text delta
    (counted item by item) and the question; one run's answer lets the other run and both readers finish."""
    import asyncio

    from tests.support.polling import eventually
    from tests.support.session_api import read_sse

    later = " ".join(f"after{i}" for i in range(30))
    settings.model = script(
        [
            {"say": WORDS, "word_seconds": 0.15, "tool_calls": [ASK]},
            {"say": "answered {{last_tool}} " + later, "word_seconds": 0.05},
        ]
    )
    thread = f"agui-{uuid.uuid4().hex[:8]}"
    async with worker_for() as client, session_api(settings, client, poll_seconds=0.05) as http:
        run_a = asyncio.create_task(run_agui(http, _input(thread, [_user("go")]), auth(FULL)))

        async def started() -> bool:
            try:
                return bool(await client.session(thread).workflow.describe())
            except Exception:
                return False

        await eventually(started, until=bool, timeout=30, interval=0.02, what="the session")
        # The second browser joins while the model writes: a run of its own, and two raw event readers.
        run_b = asyncio.create_task(run_agui(http, _input(thread, [_user("go")]), auth(READER)))
        sse = [asyncio.create_task(read_sse(http, f"/sessions/{thread}/events", auth(READER))) for _ in range(2)]
        a, b = await asyncio.gather(run_a, run_b)
        for run in (a, b):
            assert run[-1].type == "RUN_FINISHED" and run[-1].data["result"]["status"] == "waiting", _types(run)
        assert [e.data["delta"] for e in a if e.type == "TEXT_MESSAGE_CONTENT"] == [
            e.data["delta"] for e in b if e.type == "TEXT_MESSAGE_CONTENT"
        ]
        assert _text(a) == _text(b) == WORDS
        [call_a], [call_b] = _frontend_calls(a), _frontend_calls(b)
        assert call_a.data["toolCallId"] == call_b.data["toolCallId"]

        # A answers; B, reconnecting with its own cursor once the answer is in, goes on to the end as well.
        call = call_a.data["toolCallId"]
        answer_a = asyncio.create_task(run_agui(http, _input(thread, [_tool(call, "second")], _state(a)), auth(FULL)))

        async def answered() -> bool:
            return not await client.session(thread).pending_questions()

        await eventually(answered, until=bool, timeout=30, interval=0.02, what="the answer")
        rest_b = await run_agui(http, _input(thread, [_user("go")], _state(b)), auth(READER))
        rest_a = await answer_a
        for run in (rest_a, rest_b):
            assert run[-1].type == "RUN_FINISHED" and run[-1].data["result"]["status"] == "COMPLETED", [
                e.data for e in run if e.type != "TEXT_MESSAGE_CONTENT"
            ]
        assert _text(rest_a) == _text(rest_b)
        assert _text(rest_a).startswith("answered ") and '="Second"' in _text(rest_a) and _text(rest_a).endswith(later)
        reads = await asyncio.gather(*sse)

    one, two = reads
    assert one.ended and two.ended
    assert one.events[-1].data["status"] == two.events[-1].data["status"] == "COMPLETED"
    # Item by item: the same items, in the same order, every offset of the root's stream once.
    assert [(e.id, e.data) for e in one.items] == [(e.id, e.data) for e in two.items]
    offsets = [e.data["offset"] for e in one.items]
    assert offsets == list(range(len(offsets)))
    deltas = [e.data["data"]["text"] for e in one.items if e.data["kind"] == "text_delta"]
    assert len(deltas) >= 10 and {"question", "answer"} <= {e.data["kind"] for e in one.items}


async def test_a_run_that_has_ended_waits_for_nothing_whatever_its_queries_say() -> None:
    """Every session passes through ``idle`` on its way to its end: once its run has closed, the idle item
    (or a call) does not make the AG-UI run end as waiting, even when the queries cannot be answered."""
    from types import SimpleNamespace

    from temporalio.client import WorkflowExecutionStatus

    from agent_tools._service.agui_routes import _still_waiting

    class Handle:
        def __init__(self, status: WorkflowExecutionStatus) -> None:
            async def describe() -> Any:
                return SimpleNamespace(status=status)

            self.workflow = SimpleNamespace(describe=describe)

        async def status(self) -> Any:
            raise RuntimeError("no worker answers for a closed run just now")

        pending_questions = pending_approvals = status

    class Client:
        def __init__(self, status: WorkflowExecutionStatus) -> None:
            self.state = status

        def session(self, session_id: str) -> Handle:
            return Handle(self.state)

    closed = Client(WorkflowExecutionStatus.COMPLETED)
    assert await _still_waiting(closed, "s", ["message"]) == []
    assert await _still_waiting(closed, "s", ["a1", "sub-1#a2"]) == []
    # A running session whose queries fail: the run ends as waiting on what it saw (the next run says more).
    running = Client(WorkflowExecutionStatus.RUNNING)
    assert await _still_waiting(running, "s", ["message", "a1"]) == ["message", "a1"]
