"""wait_for_event over time and faults: the timeout path (time-skipping server), a worker stopped while a
session waits, and the router continuing-as-new with its subscriptions."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._session import SessionResult, SessionStatus
from agent_tools._settings import Settings
from agent_tools.contracts._events.contract import MAX_TIMEOUT_SECONDS, router_workflow_id
from tests.support.events import TOKEN, final_event, ingress, router_state, subscribed, wait_script
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.temporal import running_worker, skip_time

SKIP = MAX_TIMEOUT_SECONDS + 100


async def skipping_result(env: WorkflowEnvironment, session_id: str, seconds: float) -> SessionResult:
    """Skip ``seconds`` of server time, then read the result (the env's own client unlocks skipping)."""
    handle = env.client.get_workflow_handle(session_id, result_type=SessionResult)
    for _ in range(200):  # until the wait began (its timer is what we skip over)
        if await handle.query("event_waits", result_type=list):
            break
        await asyncio.sleep(0.05)
    await skip_time(env, seconds)
    result: SessionResult = await handle.result()
    return result


async def test_timeout_reports_and_tells_the_agent_to_check_directly(
    settings: Settings, script: Script, time_skipping_env: WorkflowEnvironment
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "github.check_suite", "match": {"pr": 420}})  # default 900 s
    async with running_worker(time_skipping_env, settings) as client:
        handle = await client.start_session("wait for CI", organisation="acme", project=project)
        result = await asyncio.wait_for(skipping_result(time_skipping_env, handle.id, SKIP), 60)
        assert result.status == SessionStatus.completed
        data = final_event(result.final_message)
        assert data["status"] == "timeout"
        assert 900 <= data["waited_seconds"] < 960
        assert "check the status directly" in data["message"]
        assert "event" not in data


async def test_timeout_above_the_maximum_is_capped(
    settings: Settings, script: Script, time_skipping_env: WorkflowEnvironment
) -> None:
    settings.model = wait_script(script, {"kind": "job.done", "timeout_seconds": 100_000})
    async with running_worker(time_skipping_env, settings) as client:
        handle = await client.start_session("wait", organisation="acme", project=f"p-{uuid.uuid4().hex[:8]}")
        data = final_event(
            (await asyncio.wait_for(skipping_result(time_skipping_env, handle.id, SKIP), 60)).final_message
        )
        assert data["status"] == "timeout"
        assert MAX_TIMEOUT_SECONDS <= data["waited_seconds"] < MAX_TIMEOUT_SECONDS + 60


async def test_worker_stopped_while_waiting_event_delivered_new_worker_finishes(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "github.check_suite", "match": {"pr": 420}, "timeout_seconds": 300})
    async with worker_for() as client:
        handle_id = (await client.start_session("wait for CI", organisation="acme", project=project)).id
        await subscribed(client, project, 1)
    # No worker runs now: the ingress stores the event and signals the router, whose task waits in history.
    async with ingress(settings, temporal_env.client, project) as (http, _store):
        resp = await http.post(
            "/v1/events",
            json={"kind": "github.check_suite.completed", "payload": {"pr": 420}, "id": "while-down"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert resp.status_code == 202, resp.text
    await asyncio.sleep(0.5)
    async with worker_for() as client:
        result = await asyncio.wait_for(client.session(handle_id).result(), 60)
        assert final_event(result.final_message)["event"]["event_id"] == resp.json()["event_id"]


async def test_router_continues_as_new_and_keeps_subscriptions(
    settings: Settings, script: Script, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.events.router_max_history_events = 20
    settings.events.direct_delivery = False  # the router's path: the waits and the events go to it
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "tick", "match": {"n": 999}, "timeout_seconds": 120})
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, router_max_history_events=20, direct_delivery=False) as (
            http,
            _store,
        ),
    ):
        handle = await client.start_session("wait", organisation="acme", project=project)
        await subscribed(client, project, 1)
        router = client.temporal.get_workflow_handle(router_workflow_id("acme", project))
        first_run = (await router.describe()).run_id
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for n in range(12):  # non-matching events grow the router's history past 20 events
            resp = await http.post("/v1/events", json={"kind": "tick", "payload": {"n": n}}, headers=auth)
            assert resp.status_code == 202
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert (await router.describe()).run_id != first_run
        assert len((await router_state(client, project)).subscriptions) == 1
        assert (await handle.status()).status == SessionStatus.waiting_for_event
        match = await http.post("/v1/events", json={"kind": "tick", "payload": {"n": 999}}, headers=auth)
        result = await asyncio.wait_for(handle.result(), 60)
        assert json.loads(result.final_message.removeprefix("got: "))["event"]["event_id"] == match.json()["event_id"]  # type: ignore[union-attr]


async def test_histories_of_a_wait_and_of_the_router_replay(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """Determinism: the session that waited and received, and the router that continued-as-new, replay."""
    from temporalio.worker import Replayer

    from agent_tools._plugin import AgentToolsPlugin

    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "tick", "match": {"n": 3}, "timeout_seconds": 120})
    settings.events.direct_delivery = False  # the router's path, so that the router has a history
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, router_max_history_events=20, direct_delivery=False) as (
            http,
            _store,
        ),
    ):
        handle = await client.start_session("wait", organisation="acme", project=project)
        await subscribed(client, project, 1)
        for n in range(4):
            resp = await http.post(
                "/v1/events", json={"kind": "tick", "payload": {"n": n}}, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            assert resp.status_code == 202
        await asyncio.wait_for(handle.result(), 60)
        histories = [await handle.workflow.fetch_history()]
        router = client.temporal.get_workflow_handle(router_workflow_id("acme", project))
        histories.append(await router.fetch_history())
    replayer = Replayer(workflows=[], plugins=[AgentToolsPlugin(settings)])
    for history in histories:
        await replayer.replay_workflow(history)
    assert len(histories[0].events) > 10 and len(histories[1].events) > 3


async def test_stop_while_waiting_ends_the_wait(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "never", "timeout_seconds": 600})
    async with worker_for() as client:
        handle = await client.start_session("wait", organisation="acme", project=project)
        await subscribed(client, project, 1)
        await handle.stop("enough")
        result = await asyncio.wait_for(handle.result(), 60)
        assert result.status == SessionStatus.stopped


@pytest.mark.slow  # the dead worker's sticky queue times out first (~10 s)
async def test_worker_process_killed_while_waiting_event_delivered_after_restart(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """SIGKILL, not a graceful shutdown: the worker process dies with the session parked on its timer."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from agent_tools._client import AgentToolsClient

    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = wait_script(script, {"kind": "github.check_suite", "match": {"pr": 420}, "timeout_seconds": 300})
    env = {
        **os.environ,
        "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_MODEL": settings.model,
    }
    worker_py = Path(__file__).resolve().parent.parent / "worker.py"
    proc = subprocess.Popen([sys.executable, str(worker_py)], env=env, cwd=tmp_path)
    try:
        client = AgentToolsClient(temporal_env.client, settings)
        handle = await client.start_session("wait for CI", organisation="acme", project=project)
        await subscribed(client, project, 1)
        assert (await handle.status()).status == SessionStatus.waiting_for_event
    finally:
        proc.kill()
        proc.wait(10)
    async with ingress(settings, temporal_env.client, project) as (http, _store):
        resp = await http.post(
            "/v1/events",
            json={"kind": "github.check_suite.completed", "payload": {"pr": 420}, "id": "after-kill"},
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert resp.status_code == 202, resp.text
    async with worker_for() as client:
        result = await asyncio.wait_for(client.session(handle.id).result(), 90)
        assert final_event(result.final_message)["event"]["event_id"] == resp.json()["event_id"]


async def test_router_drops_expired_subscriptions_and_keeps_routing(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    project = f"p-{uuid.uuid4().hex[:8]}"
    settings.model = str(
        script(
            [
                {
                    "match": {"prompt_contains": "short"},
                    "turns": [
                        {
                            "say": "",
                            "tool_calls": [
                                {"name": "wait_for_event", "arguments": {"kind": "a", "timeout_seconds": 1}}
                            ],
                        },
                        {"say": "got: {{last_tool}}"},
                    ],
                },
                {
                    "turns": [
                        {
                            "say": "",
                            "tool_calls": [
                                {"name": "wait_for_event", "arguments": {"kind": "a", "timeout_seconds": 60}}
                            ],
                        },
                        {"say": "got: {{last_tool}}"},
                    ]
                },
            ]
        )
    )
    settings.events.direct_delivery = False  # the router's path: its subscriptions are what is dropped
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, direct_delivery=False) as (http, _store),
    ):
        short = await client.start_session("short wait", organisation="acme", project=project)
        assert final_event((await asyncio.wait_for(short.result(), 60)).final_message)["status"] == "timeout"

        async def dropped() -> bool:
            return not (await router_state(client, project)).subscriptions

        # The router woke at the deadline and dropped it.
        await eventually(dropped, timeout=30, interval=0.05, what="the subscription dropped")
        long = await client.start_session("long wait", organisation="acme", project=project)
        await subscribed(client, project, 1)
        resp = await http.post("/v1/events", json={"kind": "a.b"}, headers={"Authorization": f"Bearer {TOKEN}"})
        result = await asyncio.wait_for(long.result(), 60)
        assert final_event(result.final_message)["event"]["event_id"] == resp.json()["event_id"]


async def test_event_state_survives_continue_as_new_and_a_second_wait_gets_a_new_event(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    from agent_tools.contracts._events.contract import EventWaitState

    project = f"p-{uuid.uuid4().hex[:8]}"
    wait = {"name": "wait_for_event", "arguments": {"kind": "job", "timeout_seconds": 60}}
    settings.model = str(
        script(
            [
                {"say": "", "tool_calls": [wait]},
                {"say": "first: {{last_tool}}"},
                {"say": "", "tool_calls": [wait]},
                {"say": "second: {{last_tool}}"},
            ]
        )
    )
    async with worker_for() as client, ingress(settings, client.temporal, project) as (http, _store):
        handle = await client.start_session(
            "jobs", organisation="acme", project=project, keep_alive=True,
            options={"continue_as_new_after_turns": 1},
        )  # fmt: skip
        await subscribed(client, project, 1)
        first_run = (await handle.workflow.describe()).run_id
        auth = {"Authorization": f"Bearer {TOKEN}"}
        one = await http.post("/v1/events", json={"kind": "job.done", "payload": {"n": 1}}, headers=auth)

        async def continued() -> bool:
            return bool((await handle.workflow.describe()).run_id != first_run)

        await eventually(continued, timeout=30, interval=0.05, what="a new run")
        state = await handle.query("event_state", EventWaitState)
        assert state.events_received == 1 and state.delivered_event_ids == [one.json()["event_id"]]
        assert state.waits == {}
        await handle.send("again")
        await subscribed(client, project, 1)
        two = await http.post("/v1/events", json={"kind": "job.done", "payload": {"n": 2}}, headers=auth)

        async def answered() -> bool:
            return bool((await handle.latest_message()).content.startswith("second: "))

        await eventually(answered, timeout=30, interval=0.05, what="the second answer")
        second = json.loads((await handle.latest_message()).content.removeprefix("second: "))
        assert second["event"]["event_id"] == two.json()["event_id"]
        state = await handle.query("event_state", EventWaitState)
        assert state.events_received == 2 and state.waits_started == 2
        await handle.stop()


async def test_router_continues_as_new_before_large_payloads_fill_its_history(
    settings: Settings, worker_for: WorkerFor
) -> None:
    from agent_tools.contracts._events.contract import RouterInput

    project = f"p-{uuid.uuid4().hex[:8]}"
    async with (
        worker_for() as client,
        ingress(settings, client.temporal, project, direct_delivery=False) as (http, _store),  # routes every event
    ):
        router = await client.temporal.start_workflow(
            "EventRouter",
            RouterInput(organisation="acme", project=project, max_history_bytes=100_000),
            id=router_workflow_id("acme", project),
            task_queue=settings.task_queue,
        )
        first_run = (await router.describe()).run_id
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for n in range(3):
            payload = {"n": n, "blob": "x" * 60_000}
            resp = await http.post("/v1/events", json={"kind": "big", "payload": payload}, headers=auth)
            assert resp.status_code == 202

        async def continued() -> bool:
            return bool((await router.describe()).run_id != first_run)

        await eventually(continued, timeout=30, interval=0.05, what="a new run")
        assert (await router_state(client, project)).events_seen >= 1
