"""Continue-as-new in the middle of a durable wait: a turn parked on askUser or wait_for_event
hands its step to a new run, which resumes the wait; the answer or the event that arrives afterwards
completes the same tool call exactly once, and nothing that arrived meanwhile is lost."""

from __future__ import annotations

import asyncio
import itertools
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.sessions import runs

QUESTION = {
    "question": "Which store should we use?",
    "header": "Store",
    "options": [{"label": "SQLite", "description": "embedded"}, {"label": "PostgreSQL", "description": "scale"}],
}


async def run_sizes(temporal: Client, session_id: str) -> list[tuple[int, int]]:
    """(events, bytes) of every run of the chain."""
    sizes = []
    for run_id in await runs(temporal, session_id):
        history = await temporal.get_workflow_handle(session_id, run_id=run_id).fetch_history()
        sizes.append((len(history.events), sum(e.ByteSize() for e in history.events)))
    return sizes


def ask_script(script: Callable[[list[Any]], str]) -> str:
    return script(
        [
            {
                "repeat_last": True,
                "turns": [
                    {"say": "", "tool_calls": [{"name": "askUser", "arguments": {"questions": [QUESTION]}}]},
                    {"say": "answered: {{last_tool}}"},
                    {"say": "echo {{last_user}}"},
                ],
            }
        ]
    )


def settled(handle: SessionHandle, samples: int = 10) -> Callable[[], Awaitable[bool]]:
    """A check for ``until``: the chain's latest run is running, and its run and history length were the
    same in the last ``samples`` looks (half a second at ``until``'s pace)."""
    seen: list[tuple[str | None, int]] = []

    async def check() -> bool:
        now = await handle.workflow.describe()
        seen.append((now.run_id, now.history_length))
        recent = seen[-samples:]
        return now.status == WorkflowExecutionStatus.RUNNING and len(recent) == samples and len(set(recent)) == 1

    return check


async def tool_results(handle: SessionHandle) -> list[Any]:
    return [e for e in await handle.transcript(limit=500) if e.role == "tool"]


async def test_ask_user_continues_as_new_while_waiting_and_the_answer_completes_the_call_once(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    settings.model = ask_script(script)
    async with worker_for() as client:
        handle = await client.start_session(
            "choose a store", tools=["askUser"], options={"continue_as_new_after_events": 100}
        )

        async def asked() -> bool:
            return bool(await handle.pending_questions())

        await eventually(asked, timeout=120, interval=0.05, what="the question")
        temporal = temporal_env.client
        sent = 0
        # Messages arrive while the question waits: each one (an update) adds history, until the run hands
        # the parked step over; twice, so a resumed wait is itself handed over again.
        while len(await runs(temporal, handle.id)) < 3:
            # A bound, not a figure: bursts that share a workflow task add fewer events each (60 fell short once
            # on a loaded machine, whose tasks batch more).
            assert sent < 150, "the run never continued-as-new while waiting"
            # Three at a time, so that updates are in flight while a run drains: each one is answered.
            burst = await asyncio.gather(*(handle.send(f"note {sent + i}") for i in range(3)))
            assert all(accepted.position >= 0 for accepted in burst)
            sent += 3
        status = await handle.status()
        assert status.status == SessionStatus.waiting_for_user and status.turns == 1
        assert [q.question for q in await handle.pending_questions()] == [QUESTION["question"]]
        await handle.answer_questions({QUESTION["question"]: "PostgreSQL"})
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
        sizes = await run_sizes(temporal, handle.id)
    assert result.status == SessionStatus.completed
    tools = [e for e in entries if e.role == "tool"]
    assert len(tools) == 1 and "PostgreSQL" in tools[0].content, tools  # one result for the one call
    assistant = [e.content for e in entries if e.role == "assistant"]
    assert assistant[1].startswith("answered: ") and "PostgreSQL" in assistant[1]
    # Every message that arrived during the wait and the hand-overs ran once, in order.
    users = [e.content for e in entries if e.role == "user"]
    assert users[0] == "choose a store" and sorted(users[1:]) == sorted(f"note {i}" for i in range(sent))
    assert [e.seq for e in entries] == list(range(len(entries)))
    assert len(sizes) >= 3
    # A run ends once it reaches the budget at a point it can hand over: a few events past it at most.
    assert max(events for events, _ in sizes) < 100 + 40, sizes


async def test_answer_and_hand_over_in_one_activation(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """The race: with the worker down, messages (past the history budget) and the answer arrive together, so
    one activation both wakes the parked askUser and makes a hand-over due. The call completes once."""
    settings.model = ask_script(script)
    async with worker_for() as client:
        handle = await client.start_session(
            "choose a store", tools=["askUser"], options={"continue_as_new_after_events": 100}
        )

        async def asked() -> bool:
            return bool(await handle.pending_questions())

        await eventually(asked, timeout=120, interval=0.05, what="the question")
    # Enough signals that the run's history passes the budget in the activation that takes the answer.
    notes = [f"note {i}" for i in range(90)]
    async with AgentToolsClient(temporal_env.client, settings) as idle:  # no worker runs meanwhile
        waiting = idle.session(handle.id)
        for note in notes:
            await waiting.send_signal(note)
        await waiting.answer_questions({QUESTION["question"]: "SQLite"}, by_signal=True)
    async with worker_for() as client:
        handle = client.session(handle.id)
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
        chain = await runs(temporal_env.client, handle.id)
        first = await temporal_env.client.get_workflow_handle(handle.id, run_id=chain[0]).fetch_history()
    assert result.status == SessionStatus.completed
    # The loop saw the hand-over due before the woken wait resumed: the wait stayed parked, the first run
    # ran no model step after the question, and the next run completed the call from the carried answer.
    scheduled = [e for e in first.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert len(scheduled) == 1 and first.events[-1].HasField("workflow_execution_continued_as_new_event_attributes")
    tools = [e for e in entries if e.role == "tool"]
    assert len(tools) == 1 and "SQLite" in tools[0].content, tools
    assert [e.content for e in entries if e.role == "user"] == ["choose a store", *notes]
    assert json.dumps([e.seq for e in entries]) == json.dumps(list(range(len(entries))))


async def test_wait_for_event_continues_as_new_while_waiting_and_the_event_completes_the_call_once(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """A step of two calls, one done at once (todoWrite) and one parked (wait_for_event): the new runs carry
    the done result and the router's subscription; the event that comes after two hand-overs completes it."""
    from tests.support.events import TOKEN, ingress, subscribed

    project = f"mid-wait-{uuid.uuid4().hex[:6]}"
    settings.model = script(
        [
            {
                "repeat_last": True,
                "turns": [
                    {"say": "", "tool_calls": [
                        {"name": "todoWrite", "arguments": {"todos": [{"content": "wait for CI", "status": "in_progress"}]}},
                        {"name": "wait_for_event", "arguments": {"kind": "ci.build", "match": {"ok": True}}},
                    ]},
                    {"say": "got: {{tool_results}}"},
                    {"say": "echo {{last_user}}"},
                ],
            }
        ]
    )  # fmt: skip
    async with worker_for() as client, ingress(settings, temporal_env.client, project) as (http, _store):
        handle = await client.start_session(
            "wait for CI",
            tools=["todoWrite", "wait_for_event"],
            organisation="acme",
            project=project,
            options={"continue_as_new_after_events": 100},
        )
        await subscribed(client, project, 1)
        temporal = temporal_env.client
        sent = 0
        while len(await runs(temporal, handle.id)) < 3:
            # A bound, not a figure: bursts that share a workflow task add fewer events each (60 fell short once
            # on a loaded machine, whose tasks batch more).
            assert sent < 150, "the run never continued-as-new while waiting"
            await handle.send(f"note {sent}")
            sent += 1
        assert (await handle.status()).status == SessionStatus.waiting_for_event
        waits = await handle.query("event_waits", list[dict[str, Any]])
        assert [w["kind"] for w in waits] == ["ci.build"]
        for ok in (False, True):
            resp = await http.post(
                "/v1/events",
                json={"kind": "ci.build.done", "payload": {"ok": ok, "n": 7}},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert resp.status_code == 202, resp.text
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
    assert result.status == SessionStatus.completed
    tools = [e for e in entries if e.role == "tool"]
    assert [t.name for t in tools] == ["todoWrite", "wait_for_event"], tools
    assert '"ok": true' in tools[1].content.replace('"ok":true', '"ok": true'), tools[1].content
    assert '"status": "received"' in tools[1].content.replace('"status":"received"', '"status": "received"')
    assert [e.content for e in entries if e.role == "user"] == ["wait for CI", *[f"note {i}" for i in range(sent)]]


async def test_long_wait_keeps_every_run_below_a_tenth_of_the_warning_limits(
    settings: Settings, time_skipping_env: WorkflowEnvironment
) -> None:
    """bench/long_wait.py over five simulated days (the bench runs thirty): hourly loop ticks, hourly messages
    and a subscriber while askUser waits; the session continues-as-new mid-wait, every run stays below a
    tenth of Temporal's warning limits, and the answer completes the original call once."""
    from bench.long_wait import WARN_EVENTS, check, long_wait

    figures = await asyncio.wait_for(long_wait(time_skipping_env, settings, hours=120, budget=400), 300)
    check(figures)
    assert len(figures.runs) >= 3, figures.runs  # it continued-as-new, twice at least, while waiting
    assert sum(events for events, _ in figures.runs) > WARN_EVENTS // 10  # one run would have passed the bound


async def test_an_idle_subscriber_adds_no_history(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    """What following a session costs its history: the client polls the stream by query, so a subscriber of
    an idle session, however often it asks, adds no event."""
    settings.model = script([{"say": "", "tool_calls": [{"name": "askUser", "arguments": {"questions": [QUESTION]}}]}])
    async with worker_for() as client:
        handle = await client.start_session("choose a store", tools=["askUser"])

        async def asked() -> bool:
            return bool(await handle.pending_questions())

        await eventually(asked, timeout=120, interval=0.05, what="the question")
        seen: list[str] = []

        async def follow() -> None:
            async for event in handle.progress(poll=timedelta(milliseconds=10)):
                seen.append(event.kind)

        subscriber = asyncio.create_task(follow())
        await eventually(
            lambda: _true_when("question" in seen), timeout=120, interval=0.05, what="the subscriber to catch up"
        )
        await asyncio.sleep(0.5)
        before = len((await handle.workflow.fetch_history()).events)
        await asyncio.sleep(3)  # 300 poll intervals of 10 ms
        after = len((await handle.workflow.fetch_history()).events)
        subscriber.cancel()
        await asyncio.gather(subscriber, return_exceptions=True)
        await handle.stop()
    assert after - before == 0, (before, after)


async def _true_when(value: bool) -> bool:
    return value


async def test_sync_sub_agent_wait_continues_as_new_and_the_childs_end_completes_the_call_once(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """The parent's turn waits on a sync subAgent whose child waits on askUser: the parent hands the step
    over twice (the child runs on, abandoned rather than closed), and the child's end reaches the same call."""
    settings.model = script(
        [
            {"match": {"title": "Helper"}, "turns": [
                {"say": "", "tool_calls": [{"name": "askUser", "arguments": {"questions": [QUESTION]}}]},
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
    async with worker_for() as client:
        handle = await client.start_session(
            "delegate", tools=["subAgent", "askUser"], options={"continue_as_new_after_events": 100}
        )
        child = client.session(f"{handle.id}/sub-1")

        async def child_asked() -> bool:
            try:
                return bool(await child.pending_questions())
            except Exception:
                return False

        await eventually(child_asked, timeout=120, interval=0.05, what="the child's question")
        sent = 0
        while len(await runs(temporal_env.client, handle.id)) < 3:
            assert sent < 60, "the parent never continued-as-new while waiting"
            await handle.send(f"note {sent}")
            sent += 1
        await child.answer_questions({QUESTION["question"]: "PostgreSQL"})
        result = await asyncio.wait_for(handle.result(), 120)
        entries = await handle.transcript(limit=500)
    assert result.status == SessionStatus.completed
    tools = [e for e in entries if e.role == "tool"]
    assert len(tools) == 1 and tools[0].name == "subAgent", tools
    assert "PostgreSQL" in tools[0].content and '"status":"completed"' in tools[0].content.replace(" ", "")
    assistant = [e.content for e in entries if e.role == "assistant"]
    assert assistant[1].startswith("parent got: ")
    # The child's end was the call's result, not also an inbox notification.
    assert [e.content for e in entries if e.role == "user"] == ["delegate", *[f"note {i}" for i in range(sent)]]


async def test_invoke_sub_agent_bounded_wait_keeps_its_deadline_across_continue_as_new(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """invoke_sub_agent waits a bounded time; handed over mid-wait, the new run waits only for what is left
    of it (its timer is shorter), and the call gets one "still running" result when the time is up."""
    from agent_tools._agents import AgentDefinition

    agents = [
        AgentDefinition(name="orch", subagents=["slow"], profile="fyai", tools=["invoke_sub_agent"]),
        AgentDefinition(name="slow"),
    ]
    settings.model = script(
        [
            {"match": {"agent": "slow"}, "turns": [
                {"say": "", "tool_calls": [{"name": "askUser", "arguments": {"questions": [QUESTION]}}]},
            ]},
            {"match": {"agent": "orch"}, "repeat_last": True, "turns": [
                {"say": "", "tool_calls": [
                    {"name": "invoke_sub_agent", "arguments": {"agent_name": "slow", "task_input": "ask"}}
                ]},
                {"say": "still: {{last_tool}}"},
                {"say": "echo {{last_user}}"},
            ]},
        ]
    )  # fmt: skip
    wait = 8.0
    async with worker_for(agents=agents) as client:
        handle = await client.start_session(
            "start",
            agent="orch",
            options={"delegation_invoke_wait_seconds": wait, "continue_as_new_after_events": 100},
        )
        child = client.session(f"{handle.id}/sub-1")

        async def child_asked() -> bool:
            try:
                return bool(await child.pending_questions())
            except Exception:
                return False

        await eventually(child_asked, timeout=120, interval=0.05, what="the child's question")
        sent = 0
        while len(await runs(temporal_env.client, handle.id)) < 2:
            assert sent < 60, "the parent never continued-as-new while waiting"
            await handle.send(f"note {sent}")
            sent += 1

        async def timed_out() -> bool:
            return any(e.role == "assistant" and e.content.startswith("still: ") for e in await handle.transcript())

        await eventually(timed_out, timeout=120, interval=0.05, what="the bounded wait to end")
        entries = await handle.transcript(limit=500)
        chain = await runs(temporal_env.client, handle.id)
        timers: list[float] = []
        for run_id in chain:
            history = await temporal_env.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
            timers += [
                e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
                for e in history.events
                if e.HasField("timer_started_event_attributes")
            ]
        await handle.stop()
    invokes = [e for e in entries if e.role == "tool" and e.name == "invoke_sub_agent"]
    assert len(invokes) == 1 and '"status":"running"' in invokes[0].content.replace(" ", ""), invokes
    # The first run's timer is the whole wait; each resumed run's is what was left of it.
    assert len(timers) >= 2 and timers[0] == wait, timers
    assert all(0 < later < earlier for earlier, later in itertools.pairwise(timers)), timers


async def test_ask_user_timeout_keeps_its_deadline_across_continue_as_new(
    settings: Settings, script: Script, time_skipping_env: WorkflowEnvironment
) -> None:
    """An askUser with a two-day timeout, handed over mid-wait while hourly messages arrive: the default
    answer comes at the deadline set when it was asked (not two days after the last hand-over), once."""
    from bench.long_wait import chain_sizes
    from tests.support.temporal import running_worker, skip_time

    settings.model = ask_script(script)
    async with running_worker(time_skipping_env, settings) as client:
        handle = await client.start_session(
            "choose a store",
            tools=["askUser"],
            keep_alive=True,
            options={
                "continue_as_new_after_events": 100,
                "ask_user_timeout_seconds": 48 * 3600,
                "ask_user_default": "first",
            },
        )

        async def asked() -> bool:
            return bool(await handle.pending_questions())

        await eventually(asked, timeout=120, interval=0.05, what="the question")
        first_run = (await handle.workflow.describe()).run_id
        # Messages for 47 hours, skipped one by one: each one adds history, and the wait is handed over.
        for hour in range(47):
            await skip_time(time_skipping_env, 3600)
            await handle.send(f"hour {hour}")
        assert (await handle.status()).status == SessionStatus.waiting_for_user
        parked_runs = len(await chain_sizes(time_skipping_env.client, handle.id, first_run))

        async def answered() -> bool:
            return any(e.role == "tool" for e in await handle.transcript())

        # The rest by the server's own skipping (an explicit sleep across the deadline would wait in real time
        # while the 47 queued messages run as turns, and its RPC could time out).
        async with time_skipping_env.time_skipping_unlocked():  # type: ignore[attr-defined]  # the test server's
            await eventually(answered, timeout=120, interval=0.05, what="the timed-out result")

        # The 47 queued messages now run as turns, and the runs keep handing over at 100 events. The
        # time-skipping test server is not atomic at a hand-over: a query that reaches the run as it
        # continues-as-new is never answered (the RPC times out after 30 s), and a signal just after it can
        # find the chain "Completed" (both seen as this test's flake). So the state is read once the last
        # message's turn is in the store and the chain has settled on one running run.
        async def echoed_last() -> bool:
            return any(e.content == "echo hour 46" for e in await handle.transcript(limit=500))

        await eventually(echoed_last, timeout=120, interval=0.05, what="the queued messages' turns")
        await eventually(settled(handle), timeout=120, interval=0.05, what="the last hand-over")
        human = await handle.query("human_state", dict[str, Any])
        await handle.stop()
        # Closed before the worker goes: a run left behind would hold the shared time-skipping server's clock.
        await asyncio.wait_for(handle.result(), 60)
        entries = await handle.transcript(limit=500)
    assert parked_runs >= 3, parked_runs  # handed over twice at least before the deadline
    tools = [e for e in entries if e.role == "tool"]
    assert len(tools) == 1 and "did not answer within 172800 seconds" in tools[0].content, tools
    assert '"SQLite"' in tools[0].content  # the default, the first option
    [done] = human["answered"]
    assert done["timed_out"] is True
    # The deadline of the ask, not a fresh one per run (the last hand-over was hours before it).
    waited = datetime.fromisoformat(done["finished_at"]) - datetime.fromisoformat(done["asked_at"])
    assert timedelta(hours=48) <= waited < timedelta(hours=48, minutes=5), waited


async def test_an_idle_session_continues_as_new_when_its_history_grows(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """No turn runs, so no turn's end checks the history: signals that only add events (answers nobody
    asked for, recorded as rejected) make the idle session continue-as-new by itself, and it still works."""
    settings.model = script([{"say": "hello"}, {"say": "echo {{last_user}}"}])
    async with worker_for() as client:
        handle = await client.start_session(
            "hi", tools=[], keep_alive=True, options={"continue_as_new_after_events": 100}
        )

        async def idle() -> bool:
            return (await handle.status()).status == SessionStatus.idle

        await eventually(idle, timeout=120, interval=0.05, what="the session to be idle")
        sent = 0
        while len(await runs(temporal_env.client, handle.id)) < 3:
            assert sent < 120, "the idle session never continued-as-new"
            await handle.answer_questions({"Nobody asked?": "x"}, by_signal=True)
            sent += 1
        assert (await handle.status()).status == SessionStatus.idle
        await handle.send("still there")

        async def echoed() -> bool:
            return (await handle.latest_message()).content == "echo still there"

        await eventually(echoed, timeout=120, interval=0.05, what="the answer after the hand-overs")
        sizes = await run_sizes(temporal_env.client, handle.id)
        await handle.stop()
    assert max(events for events, _ in sizes) < 100 + 25, sizes  # signals that raced the hand-over


async def test_stop_after_a_hand_over_cancels_the_resumed_wait(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    """A wait resumed by a new run is an ordinary wait: a stop cancels it, clears the question, and the
    session stops without a result for the call."""
    settings.model = ask_script(script)
    async with worker_for() as client:
        handle = await client.start_session(
            "choose a store", tools=["askUser"], options={"continue_as_new_after_events": 100}
        )

        async def asked() -> bool:
            return bool(await handle.pending_questions())

        await eventually(asked, timeout=120, interval=0.05, what="the question")
        sent = 0
        while len(await runs(temporal_env.client, handle.id)) < 2:
            assert sent < 60, "the run never continued-as-new while waiting"
            await handle.send(f"note {sent}")
            sent += 1
        assert (await handle.status()).status == SessionStatus.waiting_for_user
        await handle.stop("enough")
        result = await asyncio.wait_for(handle.result(), 60)
        pending = await handle.pending_questions()
        entries = await handle.transcript(limit=500)
    assert result.status == SessionStatus.stopped
    assert pending == []
    assert [e for e in entries if e.role == "tool"] == []
