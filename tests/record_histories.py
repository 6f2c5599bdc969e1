"""Record the histories that the replay test keeps checking: run each scenario on an embedded dev server
and save its history under tests/histories/<version>/, the installed package's version.

    python -m tests.record_histories            # at a release: the sessions of that release

Every scenario waits in one of the states a session can wait in (askUser, an approval, a loop's timer,
an event, a sub-agent, continue-as-new in the middle of a wait, a structured-output retry) and then
finishes. The histories of every release from 1.0.0 on replay in CI on every later commit: a workflow
change that no longer replays them would break sessions waiting across an upgrade, so it needs a patch id
(named in CHANGELOG.md). A release's recorded histories are never re-recorded.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._devserver import start_dev_server
from agent_tools._settings import Settings
from agent_tools._user_tools import tool
from agent_tools._version import package_version
from agent_tools.testing import write_script
from tests.support.polling import eventually
from tests.support.temporal import running_worker

HISTORIES = Path(__file__).parent / "histories"
# The first release's sessions: what the compatibility promise starts from.
RELEASED = HISTORIES / "1.0.0"


@tool
async def lookup(topic: str) -> str:
    """Facts about a topic."""
    return f"{topic}: facts " * 50


async def scenario_tools_in_parallel(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    model = script(
        [
            {"say": "plan", "tool_calls": [
                {"name": "todoWrite", "arguments": {"todos": [{"content": "look up", "status": "in_progress"}]}},
                {"name": "lookup", "arguments": {"topic": "temporal"}},
                {"name": "lookup", "arguments": {"topic": "agents"}},
            ]},
            {"say": "answer: {{last_tool}}"},
        ]
    )  # fmt: skip
    handle = await client.start_session(
        "research", model=model, tools=["todoWrite", "lookup"], session_id=f"replay-tools-{uuid.uuid4().hex[:6]}"
    )
    await handle.result()
    return handle.id


async def scenario_chat_with_continue_as_new(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    model = script([{"say": "one"}, {"say": "two"}, {"say": "three"}])
    handle = await client.start_session(
        "first", model=model, tools=[], keep_alive=True, options={"continue_as_new_after_turns": 2},
        session_id=f"replay-chat-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    await handle.send("second")
    await handle.send("third")
    for _ in range(200):
        if (await handle.latest_message()).content == "three":
            break
        await asyncio.sleep(0.05)
    await handle.stop("recorded")
    await handle.result()
    return handle.id


async def scenario_ask_user(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    question = {
        "question": "Which store should we use?",
        "header": "Store",
        "options": [{"label": "SQLite", "description": "embedded"}, {"label": "PostgreSQL", "description": "scale"}],
    }
    model = script(
        [
            {"say": "", "tool_calls": [{"name": "askUser", "arguments": {"questions": [question]}}]},
            {"say": "{{last_tool}}"},
        ]
    )
    handle = await client.start_session(
        "choose", model=model, tools=["askUser"], session_id=f"replay-ask-{uuid.uuid4().hex[:6]}"
    )

    async def asked() -> bool:
        return bool(await handle.pending_questions())

    await eventually(asked, timeout=60, interval=0.05, what="the question")
    await handle.answer_questions({"Which store should we use?": "PostgreSQL"})
    await handle.result()
    return handle.id


async def _continue_twice_while_waiting(client: AgentToolsClient, handle: SessionHandle) -> int:
    """Send messages until the session has continued-as-new twice while its turn waits; returns how many."""
    sent = 0
    while len([wf async for wf in client.temporal.list_workflows(f"WorkflowId = '{handle.id}'")]) < 3:
        assert sent < 60, "the session never continued-as-new while waiting"
        await handle.send(f"note {sent}")
        sent += 1
    return sent


async def scenario_ask_user_mid_wait(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """askUser waits while messages arrive; the run continues-as-new twice mid-wait, and the answer that
    comes afterwards completes the call in the third run."""
    question = {
        "question": "Which store should we use?",
        "header": "Store",
        "options": [{"label": "SQLite", "description": "embedded"}, {"label": "PostgreSQL", "description": "scale"}],
    }
    model = script(
        [
            {
                "repeat_last": True,
                "turns": [
                    {"say": "", "tool_calls": [{"name": "askUser", "arguments": {"questions": [question]}}]},
                    {"say": "answered: {{last_tool}}"},
                    {"say": "echo {{last_user}}"},
                ],
            }
        ]
    )
    handle = await client.start_session(
        "choose", model=model, tools=["askUser"], options={"continue_as_new_after_events": 100},
        session_id=f"replay-ask-mid-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip

    async def asked() -> bool:
        return bool(await handle.pending_questions())

    await eventually(asked, timeout=60, interval=0.05, what="the question")
    await _continue_twice_while_waiting(client, handle)
    await handle.answer_questions({"Which store should we use?": "SQLite"})
    await handle.result()
    return handle.id


async def scenario_subagent_mid_wait(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """The parent's turn waits on a sync subAgent whose child asks the user; the parent continues-as-new
    twice mid-wait, and the child's end completes the parent's call in its third run."""
    question = {
        "question": "Which store should we use?",
        "header": "Store",
        "options": [{"label": "SQLite", "description": "embedded"}, {"label": "PostgreSQL", "description": "scale"}],
    }
    model = script(
        [
            {"match": {"title": "Helper"}, "turns": [
                {"say": "", "tool_calls": [{"name": "askUser", "arguments": {"questions": [question]}}]},
                {"say": "helper chose {{last_tool}}"},
            ]},
            {"repeat_last": True, "turns": [
                {"say": "", "tool_calls": [
                    {"name": "subAgent", "arguments": {"title": "Helper", "instruction": "Ask.", "mode": "sync"}}
                ]},
                {"say": "parent got: {{last_tool}}"},
                {"say": "echo {{last_user}}"},
            ]},
        ]
    )  # fmt: skip
    handle = await client.start_session(
        "delegate", model=model, tools=["subAgent", "askUser"], options={"continue_as_new_after_events": 100},
        session_id=f"replay-sub-mid-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    child = client.session(f"{handle.id}/sub-1")

    async def child_asked() -> bool:
        try:
            return bool(await child.pending_questions())
        except Exception:
            return False

    await eventually(child_asked, timeout=60, interval=0.05, what="the child's question")
    await _continue_twice_while_waiting(client, handle)
    await child.answer_questions({"Which store should we use?": "SQLite"})
    await handle.result()
    return handle.id


async def scenario_subagent_and_goal(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    model = script(
        [
            {"match": {"title": "Helper"}, "turns": [{"say": "helped"}]},
            {"match": {"agent": "goal-judge"}, "turns": [{"say": '{"met": true, "reason": "the helper answered"}'}]},
            {
                "turns": [
                    {"say": "", "tool_calls": [
                        {"name": "createGoal", "arguments": {"condition": "the helper has answered", "max_turns": 3}},
                        {"name": "subAgent", "arguments": {"title": "Helper", "instruction": "Say helped.", "mode": "async"}},
                    ]},
                    {"say": "waiting for the helper"},
                    {"say": "the helper said: {{last_user}}"},
                ]
            },
        ]
    )  # fmt: skip
    handle = await client.start_session(
        "delegate", model=model, tools=["createGoal", "completeGoal", "subAgent"],
        session_id=f"replay-sub-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    await handle.result()
    return handle.id


async def scenario_streamed_text(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """A reply slow enough to stream: the history holds the activity's publish signals between the step's
    start and its result."""
    words = " ".join(f"word{i}" for i in range(40))
    model = script([{"say": words, "word_seconds": 0.04}])
    handle = await client.start_session("write", model=model, session_id=f"replay-stream-{uuid.uuid4().hex[:6]}")
    await handle.result()
    return handle.id


async def scenario_loop_timer(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """A loop of two ticks a second apart: the session waits on the loop's durable timer between them."""
    model = script(
        [
            {"turns": [
                {"say": "", "tool_calls": [
                    {"name": "createLoop", "arguments": {"prompt": "poll", "interval_seconds": 1, "max_turns": 2}}
                ]},
                {"say": "created"},
                {"say": "polled"},
            ], "repeat_last": True},
        ]
    )  # fmt: skip
    handle = await client.start_session(
        "poll", model=model, tools=["createLoop"], options={"loop_min_interval_seconds": 1},
        session_id=f"replay-loop-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    await handle.result()
    return handle.id


async def scenario_structured_output(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """A session with an output schema: the first answer is not JSON and goes back with the error."""
    model = script([{"say": "three days"}, {"say": '{"days": 3}'}])
    schema = {"type": "object", "properties": {"days": {"type": "integer"}}, "required": ["days"]}
    handle = await client.start_session(
        "plan", model=model, output_schema=schema, session_id=f"replay-output-{uuid.uuid4().hex[:6]}"
    )
    await handle.result()
    return handle.id


async def scenario_budget_reached(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """A session with a token ceiling: its first step spends past it, so the second is refused."""
    model = script(
        [
            {"say": "", "tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "x", "status": "pending"}]}}]},
            {"say": "never"},
        ]
    )  # fmt: skip
    handle = await client.start_session(
        "spend", model=model, tools=["todoWrite"], options={"budget_tokens": 1},
        session_id=f"replay-budget-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    await handle.result()
    return handle.id


async def scenario_tool_approval(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """Two calls that need approval: one approved by update (the tool runs under its grant), one denied by
    signal (the model gets the reason)."""
    model = script(
        [
            {"say": "", "tool_calls": [{"name": "lookup", "arguments": {"topic": "temporal"}}]},
            {"say": "", "tool_calls": [{"name": "lookup", "arguments": {"topic": "secrets"}}]},
            {"say": "{{last_tool}}"},
        ]
    )
    handle = await client.start_session(
        "look up", model=model, tools=["lookup"], options={"approval": {"require": ["look*"]}},
        session_id=f"replay-approval-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip

    decided: set[str] = set()
    pending: list[Any] = []

    async def waiting() -> bool:
        pending[:] = [p for p in await handle.pending_approvals() if p.approval_id not in decided]
        return bool(pending)

    for approve in (True, False):
        await eventually(waiting, timeout=60, interval=0.05, what="the event wait")
        p = pending[0]
        decided.add(p.approval_id)
        await handle.decide_approval(
            p.approval_id, approve=approve, digest=p.digest, decided_by="ana", reason=None if approve else "no",
            by_signal=not approve,
        )  # fmt: skip
    await handle.result()
    return handle.id


async def scenario_tool_approval_mid_wait(client: AgentToolsClient, script: Callable[[list[Any]], str]) -> str:
    """A call that needs approval waits while messages arrive; the run continues-as-new twice mid-wait, and the
    approval that comes afterwards runs the tool in the third run."""
    model = script(
        [
            {
                "repeat_last": True,
                "turns": [
                    {"say": "", "tool_calls": [{"name": "lookup", "arguments": {"topic": "temporal"}}]},
                    {"say": "got: {{last_tool}}"},
                    {"say": "echo {{last_user}}"},
                ],
            }
        ]
    )
    handle = await client.start_session(
        "look up", model=model, tools=["lookup"],
        options={"approval": {"require": ["look*"]}, "continue_as_new_after_events": 100},
        session_id=f"replay-approval-mid-{uuid.uuid4().hex[:6]}",
    )  # fmt: skip
    pending: list[Any] = []

    async def waiting() -> bool:
        pending[:] = await handle.pending_approvals()
        return bool(pending)

    await eventually(waiting, timeout=60, interval=0.05, what="the event wait")
    await _continue_twice_while_waiting(client, handle)
    await handle.approve(pending[0].approval_id, digest=pending[0].digest)
    await handle.result()
    return handle.id


SCENARIOS: dict[str, Callable[[AgentToolsClient, Callable[[list[Any]], str]], Awaitable[str]]] = {
    "session_tools_in_parallel": scenario_tools_in_parallel,
    "session_chat_continue_as_new": scenario_chat_with_continue_as_new,
    "session_ask_user": scenario_ask_user,
    "session_subagent_and_goal": scenario_subagent_and_goal,
    "session_streamed_text": scenario_streamed_text,
    "session_structured_output": scenario_structured_output,
    "session_loop_timer": scenario_loop_timer,
    "session_budget_reached": scenario_budget_reached,
    "session_tool_approval": scenario_tool_approval,
    "session_ask_user_mid_wait": scenario_ask_user_mid_wait,
    "session_subagent_mid_wait": scenario_subagent_mid_wait,
    "session_tool_approval_mid_wait": scenario_tool_approval_mid_wait,
}


async def save_chain(temporal: Client, name: str, wid: str) -> None:
    """Every run of the chain (continue-as-new) is a history of its own."""

    async def runs() -> list[Any]:
        return [wf async for wf in temporal.list_workflows(f"WorkflowId = '{wid}'")]

    listed = await eventually(runs, timeout=30, interval=0.2, what=f"{wid} in the visibility store")
    for wf in listed:
        history = await temporal.get_workflow_handle(wid, run_id=wf.run_id).fetch_history()
        path = HISTORIES / package_version() / f"{name}.{wf.run_id[:8]}.json"
        path.write_text(json.dumps(json.loads(history.to_json()), indent=1))
        print("recorded", path.name)


async def record_event_wait(
    client: AgentToolsClient,
    settings: Settings,
    script: Callable[[list[Any]], str],
    *,
    name: str = "session_event_wait",
) -> None:
    """A session waiting on an event delivered through the real ingress, and with ``direct_delivery`` off the
    EventRouter that routed it."""
    from agent_tools.contracts._events.contract import router_workflow_id
    from tests.support.events import TOKEN, ingress, subscribed

    project = f"replay-{uuid.uuid4().hex[:6]}"
    model = script(
        [
            {
                "say": "",
                "tool_calls": [{"name": "wait_for_event", "arguments": {"kind": "ci.build", "match": {"ok": True}}}],
            },
            {"say": "{{last_tool}}"},
        ]
    )
    async with ingress(settings, client.temporal, project) as (http, _store):
        handle = await client.start_session(
            "wait", model=model, tools=["wait_for_event"], organisation="acme", project=project,
            session_id=f"replay-event-{uuid.uuid4().hex[:6]}",
        )  # fmt: skip
        await subscribed(client, project, 1)
        for ok in (False, True):
            resp = await http.post(
                "/v1/events",
                json={"kind": "ci.build.done", "payload": {"ok": ok}},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert resp.status_code == 202, resp.text
        await handle.result()
        await save_chain(client.temporal, name, handle.id)
        if not settings.events.direct_delivery:
            await save_chain(client.temporal, "router_event_wait", router_workflow_id("acme", project))


async def record_event_wait_mid_wait(
    client: AgentToolsClient, settings: Settings, script: Callable[[list[Any]], str]
) -> None:
    """wait_for_event while messages arrive: two continue-as-new mid-wait, then the event completes the call."""
    from tests.support.events import TOKEN, ingress, subscribed

    project = f"replay-{uuid.uuid4().hex[:6]}"
    model = script(
        [
            {
                "repeat_last": True,
                "turns": [
                    {"say": "", "tool_calls": [{"name": "wait_for_event", "arguments": {"kind": "ci.build"}}]},
                    {"say": "{{last_tool}}"},
                    {"say": "echo {{last_user}}"},
                ],
            }
        ]
    )
    async with ingress(settings, client.temporal, project) as (http, _store):
        handle = await client.start_session(
            "wait", model=model, tools=["wait_for_event"], organisation="acme", project=project,
            options={"continue_as_new_after_events": 100}, session_id=f"replay-event-mid-{uuid.uuid4().hex[:6]}",
        )  # fmt: skip
        await subscribed(client, project, 1)
        await _continue_twice_while_waiting(client, handle)
        resp = await http.post(
            "/v1/events", json={"kind": "ci.build.done", "payload": {"ok": True}},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )  # fmt: skip
        assert resp.status_code == 202, resp.text
        await handle.result()
        await save_chain(client.temporal, "session_event_wait_mid_wait", handle.id)


async def record(names: list[str] | None = None) -> None:
    (HISTORIES / package_version()).mkdir(parents=True, exist_ok=True)
    env = await start_dev_server(ui=False)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            counter = iter(range(1000))

            def script(items: list[Any]) -> str:
                return write_script(Path(tmp) / f"s{next(counter)}.json", items)

            settings = Settings(
                database_url=f"sqlite+aiosqlite:///{tmp}/store.sqlite", task_queue="record", agents_file=None
            )
            async with running_worker(env, settings, tools=[lookup]) as client:
                for name, scenario in SCENARIOS.items():
                    if names and name not in names:
                        continue
                    wid = await scenario(client, script)
                    await save_chain(client.temporal, name, wid)
                if not names or "event_wait" in names:
                    await record_event_wait(client, settings, script)
                if not names or "event_wait_mid_wait" in names:
                    await record_event_wait_mid_wait(client, settings, script)
            if not names or "event_wait_routed" in names:
                events = settings.events.model_copy(update={"direct_delivery": False})
                routed = settings.model_copy(update={"events": events, "task_queue": "routed"})
                async with running_worker(env, routed, tools=[lookup]) as client:
                    await record_event_wait(client, routed, script, name="session_event_wait_routed")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    import sys

    from agent_tools._process_exit import run_and_exit

    run_and_exit(lambda: asyncio.run(record(sys.argv[1:] or None)))
