"""Bench: events per second through the ingress to waiting sessions, and the latency from the POST to
the session's next activity (``agent_tools.events.load_event``, started when the router's signal wakes it: the
workflow task that scheduled it, or that recorded it as a local activity, completed).

    python bench/events_ingress.py --sessions 200 --concurrency 32 [--paths direct,router] [--other-waits 5000]

Everything runs on this machine: the embedded Temporal dev server, one worker (in the bench's process, with
the raw reference's worker beside it; ``--worker-process`` runs both in a process of their own), the ingress (uvicorn on a
127.0.0.1 socket), SQLite in a temp dir, the scripted model. Latency uses the server's timestamp of the
ActivityTaskScheduled event minus the client's clock before the POST (same host, same clock).

Before each phase, the same number of bare workflows waiting on a signal are signalled directly on the
same server (a worker on its own queue in the same process): the raw Temporal figure the events path is
compared with, printed with the ratio. Two rates
for the events: "reached", events per second of the burst until the last session's next activity started
(the measure: the event is in the session's code), and "sessions done", until every woken session
finished the turn it woke for (a model step and the session's completion after it: work a bare workflow does
not have).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._devserver import start_dev_server
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
from agent_tools._worker import build_worker
from agent_tools.contracts._events import ACTIVITY_LOAD_EVENT, SIGNAL_EVENT_ARRIVED
from agent_tools.testing import write_script

TOKEN = "bench-token-0123456789"
ROOT = Path(__file__).resolve().parents[1]


async def next_activity_time(handle: SessionHandle) -> datetime | None:
    return (await milestones(handle))[1]


async def milestones(handle: SessionHandle) -> tuple[datetime | None, datetime | None, datetime | None]:
    """When the ``event_arrived`` signal (the ingress's or the router's) reached the session, when its next
    activity was scheduled (``load_event``, or the model step when the event rode in the delivery), and when
    the session completed (server timestamps)."""
    signalled = loaded = None
    async for ev in handle.workflow.fetch_history_events():
        at = ev.event_time.ToDatetime().replace(tzinfo=UTC)
        if (
            ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and ev.workflow_execution_signaled_event_attributes.signal_name == SIGNAL_EVENT_ARRIVED
            and signalled is None
        ):
            signalled = at
        scheduled = ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        if loaded is None and (
            (scheduled and ev.activity_task_scheduled_event_attributes.activity_type.name == ACTIVITY_LOAD_EVENT)
            or is_local_load_event(ev)
            # An event that rode in its delivery (patch inline-event) needs no load: the next model step is
            # the session's next activity.
            or (scheduled and signalled is not None)
        ):
            loaded = at
        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            return signalled, loaded, at
    return signalled, loaded, None


def is_local_load_event(ev: Any) -> bool:
    """The marker of ``load_event`` run as a local activity (patch ``load-event-local``). Its time is the
    workflow task's completion, as an ActivityTaskScheduled event's is, but after the load has run: the
    stricter of the two."""
    if ev.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
        return False
    attrs = ev.marker_recorded_event_attributes
    if attrs.marker_name != "core_local_activity" or "data" not in attrs.details:
        return False
    payloads = attrs.details["data"].payloads
    return bool(payloads) and json.loads(payloads[0].data).get("activity_type") == ACTIVITY_LOAD_EVENT


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def wait_subscribed(client: AgentToolsClient, project: str, count: int, timeout: float = 120) -> None:
    """Until ``count`` waits of the project are kept in the store, where the ingress finds them (no router
    holds them with direct delivery)."""
    from agent_tools._store.event_tables import count_open_waits

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            store = (await client.transcripts()).store
            if await count_open_waits(store, organisation="bench", project=project) >= count:
                return
        except Exception:
            pass
        await asyncio.sleep(0.1)
    raise TimeoutError("sessions did not subscribe in time")


async def add_other_waits(client: AgentToolsClient, project: str, count: int) -> None:
    """Open waits of the same kind that no event of the phase matches (``{"n": "other-<i>"}``), as the other
    sessions of a busy project hold: rows only, written straight into the store."""
    from agent_tools._store.base import upsert_rows
    from agent_tools._store.event_tables import event_subscriptions, subscription_row
    from agent_tools.contracts._events import Subscription

    now = datetime.now(UTC)
    rows = [
        subscription_row(
            "bench",
            project,
            Subscription(
                subscription_id=f"other-{project}-{i}",
                session_id=f"other-{i}",
                kind="bench.tick",
                match={"n": f"other-{i}"},
                since=now,
                deadline=now + timedelta(minutes=30),
            ),
        )
        for i in range(count)
    ]
    store = (await client.transcripts()).store
    await store.run(lambda conn: upsert_rows(conn, event_subscriptions, rows, keys=["subscription_id"]))


async def run_phase(
    project: str,
    token: str,
    client: AgentToolsClient,
    http: httpx.AsyncClient,
    sessions: int,
    concurrency: int,
    path: str,
    other_waits: int = 0,
) -> dict[str, Any]:
    handles = [await client.start_session(str(i), organisation="bench", project=project) for i in range(sessions)]
    await wait_subscribed(client, project, sessions)
    if other_waits:
        await add_other_waits(client, project, other_waits)
    sent_at: dict[int, float] = {}
    sem = asyncio.Semaphore(concurrency)

    async def post(i: int) -> None:
        async with sem:
            sent_at[i] = time.time()
            resp = await http.post(
                "/v1/events",
                json={"kind": "bench.tick", "payload": {"n": str(i)}, "id": f"{project}-{i}"},
                headers={"Authorization": f"Bearer {token}"},
            )
            resp.raise_for_status()

    start = time.perf_counter()
    start_wall = time.time()
    if concurrency == 1:
        for i in range(sessions):  # one at a time, each waking its session before the next: unloaded latency
            await post(i)
            while await next_activity_time(handles[i]) is None:  # noqa: ASYNC110 - polling another process
                await asyncio.sleep(0.005)
    else:
        await asyncio.gather(*(post(i) for i in range(sessions)))
    acked = time.perf_counter() - start
    await asyncio.gather(*(h.result() for h in handles))
    done = time.perf_counter() - start
    latencies = []
    to_signal = []
    to_done = []
    reached_last = start_wall
    for i, h in enumerate(handles):
        signalled, t, finished = await milestones(h)
        assert t is not None, h.id
        reached_last = max(reached_last, t.timestamp())
        latencies.append((t.timestamp() - sent_at[i]) * 1000)
        if signalled is not None:  # None when the backlog check found it (no signal needed)
            to_signal.append((signalled.timestamp() - sent_at[i]) * 1000)
        if finished is not None:
            to_done.append((finished.timestamp() - sent_at[i]) * 1000)
    return {
        "phase": project.rsplit("-", 2)[0],
        "path": path,
        "done_ms_p50": statistics.median(to_done) if to_done else float("nan"),
        "sessions": sessions,
        "concurrency": concurrency,
        "ingress_events_per_s": sessions / acked,
        "delivered_events_per_s": sessions / done,
        # The measure: events that reached their sessions (each session's next activity started) per
        # second of the burst; "delivered" above also waits for every woken session to finish its turn.
        "reached_events_per_s": sessions / max(reached_last - start_wall, 1e-6),
        "latency_ms_p50": statistics.median(latencies),
        "latency_ms_p95": pct(latencies, 95),
        "latency_ms_max": max(latencies),
        "signal_ms_p50": statistics.median(to_signal) if to_signal else float("nan"),
    }


async def run_raw_phase(temporal: Client, task_queue: str, n: int, concurrency: int) -> dict[str, Any]:
    """The reference: N bare workflows waiting on a signal, signalled directly (no ingress, no router, no
    store); "delivered" when the signal's workflow task completed the workflow."""
    from bench.bare_waiter import BareWaiter

    prefix = f"raw-{uuid.uuid4().hex[:6]}"
    handles = [
        await temporal.start_workflow(BareWaiter.run, str(i), id=f"{prefix}-{i}", task_queue=task_queue)
        for i in range(n)
    ]
    for h in handles:  # each has run its first workflow task and waits
        while len((await h.fetch_history()).events) < 4:  # noqa: ASYNC110 - polling the server
            await asyncio.sleep(0.01)
    sent_at: dict[int, float] = {}
    sem = asyncio.Semaphore(concurrency)

    async def send(i: int) -> None:
        async with sem:
            sent_at[i] = time.time()
            await handles[i].signal(BareWaiter.answer_question, "tick")

    start = time.perf_counter()
    if concurrency == 1:
        for i in range(n):
            await send(i)
            await handles[i].result()
    else:
        await asyncio.gather(*(send(i) for i in range(n)))
    acked = time.perf_counter() - start
    await asyncio.gather(*(h.result() for h in handles))
    done = time.perf_counter() - start
    latencies = []
    for i, h in enumerate(handles):
        async for ev in h.fetch_history_events():
            if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                latencies.append((ev.event_time.ToDatetime().replace(tzinfo=UTC).timestamp() - sent_at[i]) * 1000)
    return {
        "phase": "raw",
        "sessions": n,
        "concurrency": concurrency,
        "ingress_events_per_s": n / acked,
        "delivered_events_per_s": n / done,
        "latency_ms_p50": statistics.median(latencies),
        "latency_ms_p95": pct(latencies, 95),
        "latency_ms_max": max(latencies),
        "signal_ms_p50": float("nan"),
    }


async def run_workers(address: str, namespace: str, task_queue: str, database_url: str, model: str) -> None:
    """``--worker``: our worker and the raw reference's in a process of their own, apart from the bench's
    load (its HTTP client, its Temporal client's signals, its history polling), as a deployment runs its
    worker apart from whoever sends it events."""
    import signal

    settings = Settings(database_url=database_url, task_queue=task_queue, agents_file=None, model=model)
    plugin = AgentToolsPlugin(settings)
    temporal = await Client.connect(address, namespace=namespace, plugins=[plugin])
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with build_worker(temporal, plugin), raw_reference_worker(temporal):
        print("READY", flush=True)
        await stop.wait()


RAW_QUEUE = "events-raw"


def raw_reference_worker(temporal: Client) -> Worker:
    """The raw reference's worker, on its own queue beside ours (the plugin leaves other queues' workers as the
    SDK builds them): the SDK's defaults, with room for a whole burst's workflow tasks."""
    from bench.bare_waiter import BareWaiter

    return Worker(temporal, task_queue=RAW_QUEUE, workflows=[BareWaiter], max_concurrent_workflow_tasks=200)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_healthy(base: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient() as http:
        while True:
            try:
                if (await http.get(f"{base}/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.1)


def start_workers(client: Client, settings: Settings) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            client.service_client.config.target_host,
            client.namespace,
            settings.task_queue,
            settings.database_url,
            str(settings.model),
        ],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the workers poll (or the process died)
    if b"READY" not in line:
        raise RuntimeError(f"the workers' process did not start (exit {proc.poll()})")
    return proc


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--unloaded", type=int, default=20, help="sessions woken one at a time first")
    parser.add_argument("--rounds", type=int, default=3, help="raw / events rounds of both phases")
    parser.add_argument(
        "--other-waits",
        type=int,
        default=0,
        help="open waits of the same kind that no event matches, added to each phase's project before its events "
        "(a busy project: the ingress must not read them all for every event)",
    )
    parser.add_argument(
        "--paths",
        default="direct,router",
        help="delivery paths measured side by side, each through its own ingress process: direct (the ingress "
        "signals the waiting sessions from the store's subscriptions, and nothing else) and router "
        "(AGENT_TOOLS_EVENTS__DIRECT_DELIVERY=false: each event also routed through the EventRouter)",
    )
    parser.add_argument(
        "--worker-process",
        action="store_true",
        help="run the workers (ours and the raw reference's) in a process of their own, apart from the bench's "
        "HTTP client and polling: a profiler attached to it sees the worker alone. The ratios did not move "
        "with it",
    )
    args = parser.parse_args()
    paths = [p for p in args.paths.split(",") if p]
    assert paths and set(paths) <= {"direct", "router"}, args.paths
    sys.path.insert(0, str(ROOT))  # bench.bare_waiter, the raw reference

    tmp = Path(tempfile.mkdtemp(prefix="events-bench-"))
    wait = {"kind": "bench.tick", "match": {"n": "{{last_user}}"}, "timeout_seconds": 600}
    turns: list[dict[str, Any]] = [
        {"say": "", "tool_calls": [{"name": "wait_for_event", "arguments": wait}]},
        {"say": "done"},
    ]
    model = write_script(tmp / "script.json", turns)
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp}/store.sqlite",
        task_queue="events-bench",
        agents_file=None,
        model=model,
    )
    env = await start_dev_server(ui=False)
    plugin = AgentToolsPlugin(settings)
    temporal = await Client.connect(
        env.client.service_client.config.target_host, namespace=env.client.namespace, plugins=[plugin]
    )
    tokens: dict[str, str] = {}
    rounds = [
        {(name, path): f"{name}-{path}-{uuid.uuid4().hex[:6]}" for name in ("unloaded", "burst") for path in paths}
        for _ in range(args.rounds)
    ]
    for project in (p for projects in rounds for p in projects.values()):
        tokens[f"bench/{project}"] = f"{TOKEN}-{project}"  # one token per project, as in production
    # The ingress runs as its own process (`agent-tools serve`), as it does in docker-compose: it opens its
    # own Temporal client and store from the environment. One process per delivery path.
    servers: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    for path in paths:
        port = free_port()
        env_vars = {
            **os.environ,
            "AGENT_TOOLS_TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
            "AGENT_TOOLS_DATABASE_URL": settings.database_url,
            "AGENT_TOOLS_EVENTS__TOKENS": json.dumps(tokens),
            "AGENT_TOOLS_EVENTS__DIRECT_DELIVERY": "true" if path == "direct" else "false",
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from agent_tools._cli import main; main()",
                "serve",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            env=env_vars,
        )
        servers[path] = (proc, f"http://127.0.0.1:{port}")
    results = []
    raw_results = []
    from contextlib import AsyncExitStack

    workers_proc: subprocess.Popen[bytes] | None = None
    try:
        for _proc, base in servers.values():
            await wait_healthy(base)
        async with AsyncExitStack() as stack:
            if not args.worker_process:
                # Both workers on the same server and in the bench's own process.
                await stack.enter_async_context(build_worker(temporal, plugin))
                await stack.enter_async_context(raw_reference_worker(temporal))
            else:
                workers_proc = start_workers(env.client, settings)
            https = {path: httpx.AsyncClient(base_url=base, timeout=60) for path, (_p, base) in servers.items()}
            client = AgentToolsClient(temporal, settings)
            for r, projects in enumerate(rounds):
                for name, n, conc in (("unloaded", args.unloaded, 1), ("burst", args.sessions, args.concurrency)):
                    # Raw and ours alternate per phase, so the machine's noise falls on all; the paths swap
                    # places every round.
                    order = paths[r % len(paths) :] + paths[: r % len(paths)]
                    for path in order:
                        project = projects[(name, path)]
                        raw_results.append(await run_raw_phase(temporal, RAW_QUEUE, n, conc))
                        results.append(
                            await run_phase(
                                project, f"{TOKEN}-{project}", client, https[path], n, conc, path, args.other_waits
                            )
                        )
            await client.close()
            for http in https.values():
                await http.aclose()
    finally:
        for proc in [*(p for p, _base in servers.values()), *([workers_proc] if workers_proc else [])]:
            proc.terminate()
            proc.wait(10)
        await env.shutdown()
    for r, raw in zip(results, raw_results, strict=True):
        print(
            f"{r['phase']:>8}: raw signals to {raw['sessions']} bare waiting workflows, concurrency "
            f"{raw['concurrency']}: delivered {raw['delivered_events_per_s']:.0f}/s; signal -> its workflow task "
            f"done p50 {raw['latency_ms_p50']:.0f} ms, p95 {raw['latency_ms_p95']:.0f} ms"
        )
        print(
            f"{r['phase']:>8}: [{r['path']}] {r['sessions']} sessions, concurrency {r['concurrency']}: "
            f"ingress {r['ingress_events_per_s']:.0f} events/s, "
            f"reached {r['reached_events_per_s']:.0f} events/s (sessions done {r['delivered_events_per_s']:.0f}/s); "
            f"POST -> next activity p50 {r['latency_ms_p50']:.0f} ms, p95 {r['latency_ms_p95']:.0f} ms, "
            f"max {r['latency_ms_max']:.0f} ms (POST -> signal in the session p50 "
            f"{r['signal_ms_p50']:.0f} ms, -> session completed p50 {r['done_ms_p50']:.0f} ms)"
        )
        print(
            f"{'':>8}  events/raw: reached {r['reached_events_per_s'] / raw['delivered_events_per_s']:.2f}x "
            f"(target >= 0.5x; sessions done {r['delivered_events_per_s'] / raw['delivered_events_per_s']:.2f}x), "
            f"p50 latency {r['latency_ms_p50'] / raw['latency_ms_p50']:.2f}x"
        )
    for phase in ("unloaded", "burst"):
        for path in paths:
            pairs = [
                (r, raw)
                for r, raw in zip(results, raw_results, strict=True)
                if r["phase"] == phase and r["path"] == path
            ]
            rates = [r["reached_events_per_s"] / raw["delivered_events_per_s"] for r, raw in pairs]
            done = [r["delivered_events_per_s"] / raw["delivered_events_per_s"] for r, raw in pairs]
            lat = [r["latency_ms_p50"] / raw["latency_ms_p50"] for r, raw in pairs]
            sig = [r["signal_ms_p50"] for r, _ in pairs]
            print(
                f"{phase:>8} [{path}], medians of {len(pairs)} rounds: events/raw reached "
                f"{statistics.median(rates):.2f}x (per round {' '.join(f'{x:.2f}' for x in rates)}; target >= 0.5x), "
                f"sessions done {statistics.median(done):.2f}x (per round {' '.join(f'{x:.2f}' for x in done)}), "
                f"p50 latency {statistics.median(lat):.2f}x (per round {' '.join(f'{x:.2f}' for x in lat)}), "
                f"POST -> signal p50 per round {' '.join(f'{x:.0f}' for x in sig)} ms"
            )


if __name__ == "__main__":
    from agent_tools._process_exit import run_and_exit

    if sys.argv[1:2] == ["--worker"]:
        sys.path.insert(0, str(ROOT))  # bench.bare_waiter
        run_and_exit(lambda: asyncio.run(run_workers(*sys.argv[2:7])))
    else:
        run_and_exit(lambda: asyncio.run(main()))
