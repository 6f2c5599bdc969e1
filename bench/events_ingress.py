"""Bench: events per second through the ingress to waiting sessions, against raw signals to bare workflows.

    python bench/events_ingress.py --sessions 200 --concurrency 32 [--scales 1,2] [--paths direct,router]
        [--other-waits 5000]

Everything runs on this machine: the embedded Temporal dev server, the workers (in the bench's process, with
the raw reference's worker beside it; in processes of their own with ``--worker-process`` or a scale above 1),
the ingress (``agent-tools serve`` processes on 127.0.0.1 sockets), SQLite in a temp dir (or ``--url``), the scripted
model.

Before each phase the same number of bare workflows waiting on a signal are signalled directly on the same
server: the raw reference. Both sides count a signal *reached* when it is in the workflow's history (the
server's event time of the ``event_arrived`` signal, of the raw signal), from the first send; *sessions done*
is until every woken session finished the turn it woke for (a model step and its completion: work a bare
workflow does not have), against the bare workflows' completions. ``--scales 1,2`` runs the burst at one and
two worker processes and ingress processes in the same rounds, and prints the ratio of the two.
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
from collections.abc import Awaitable
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
from agent_tools.contracts._events.contract import ACTIVITY_LOAD_EVENT, SIGNAL_EVENT_ARRIVED
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
            # An event that rode in its delivery needs no load: the next model step is
            # the session's next activity.
            or (scheduled and signalled is not None)
        ):
            loaded = at
        if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            return signalled, loaded, at
    return signalled, loaded, None


def is_local_load_event(ev: Any) -> bool:
    """The marker of ``load_event`` run as a local activity. Its time is the
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
    from agent_tools.contracts._events.contract import Subscription

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
    https: list[httpx.AsyncClient],
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
            # Round robin over the ingress processes of the phase's scale.
            resp = await https[i % len(https)].post(
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
    reached_last = activity_last = start_wall
    for i, h in enumerate(handles):
        signalled, t, finished = await milestones(h)
        assert t is not None, h.id
        # Reached: the signal is in the session's history, as the raw reference counts its signals. A
        # session whose backlog check found the event (no signal) counts at its next activity.
        reached_last = max(reached_last, (signalled or t).timestamp())
        activity_last = max(activity_last, t.timestamp())
        latencies.append((t.timestamp() - sent_at[i]) * 1000)
        if signalled is not None:
            to_signal.append((signalled.timestamp() - sent_at[i]) * 1000)
        if finished is not None:
            to_done.append((finished.timestamp() - sent_at[i]) * 1000)
    return {
        "phase": project.rsplit("-", 2)[0],
        "path": path,
        "scale": len(https),
        "activity_events_per_s": sessions / max(activity_last - start_wall, 1e-6),
        "done_ms_p50": statistics.median(to_done) if to_done else float("nan"),
        "sessions": sessions,
        "concurrency": concurrency,
        "ingress_events_per_s": sessions / acked,
        "delivered_events_per_s": sessions / done,
        # The measure: events whose signal is in their session's history, per second of the burst;
        # "delivered" above also waits for every woken session to finish its turn.
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
    start_wall = time.time()
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
    to_signal = []
    reached_last = start_wall
    for i, h in enumerate(handles):
        async for ev in h.fetch_history_events():
            at = ev.event_time.ToDatetime().replace(tzinfo=UTC).timestamp()
            if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                reached_last = max(reached_last, at)
                to_signal.append((at - sent_at[i]) * 1000)
            if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                latencies.append((at - sent_at[i]) * 1000)
    return {
        "phase": "raw",
        "reached_events_per_s": n / max(reached_last - start_wall, 1e-6),
        "sessions": n,
        "concurrency": concurrency,
        "ingress_events_per_s": n / acked,
        "delivered_events_per_s": n / done,
        "latency_ms_p50": statistics.median(latencies),
        "latency_ms_p95": pct(latencies, 95),
        "latency_ms_max": max(latencies),
        "signal_ms_p50": statistics.median(to_signal),
    }


async def run_workers(address: str, namespace: str, queues: str, database_url: str, model: str) -> None:
    """``--worker``: our workers and the raw reference's in a process of their own, apart from the bench's
    load (its HTTP client, its Temporal client's signals, its history polling), as a deployment runs its
    worker apart from whoever sends it events. ``queues``: the scales whose queues this process polls (a
    scale of two is polled by two such processes)."""
    import signal
    from contextlib import AsyncExitStack

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with AsyncExitStack() as stack:
        for scale in (int(q) for q in queues.split(",")):
            # The plugin serves its settings' queue only: one plugin (and client) per queue.
            settings = Settings(database_url=database_url, task_queue=queue_for(scale), agents_file=None, model=model)
            plugin = AgentToolsPlugin(settings)
            temporal = await Client.connect(address, namespace=namespace, plugins=[plugin])
            await stack.enter_async_context(build_worker(temporal, plugin))
            await stack.enter_async_context(raw_reference_worker(temporal, scale))
        print("READY", flush=True)
        await stop.wait()


def queue_for(scale: int) -> str:
    """Our task queue at a scale (workers polling it): sessions of a one-worker phase run on a queue one
    worker process polls, those of a two-worker phase on one that two processes poll."""
    return f"events-bench-{scale}"


def raw_queue(scale: int) -> str:
    return f"events-raw-{scale}"


def raw_reference_worker(temporal: Client, scale: int = 1) -> Worker:
    """The raw reference's worker, on its own queue beside ours (the plugin leaves other queues' workers as the
    SDK builds them): the SDK's defaults, with room for a whole burst's workflow tasks."""
    from bench.bare_waiter import BareWaiter

    return Worker(temporal, task_queue=raw_queue(scale), workflows=[BareWaiter], max_concurrent_workflow_tasks=200)


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


def start_workers(client: Client, settings: Settings, scales: list[int]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            client.service_client.config.target_host,
            client.namespace,
            ",".join(str(s) for s in scales),
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


def parse_args() -> argparse.Namespace:
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
        default="direct",
        help="delivery paths measured side by side, each through its own ingress process(es): direct (the ingress "
        "signals the waiting sessions from the store's subscriptions, and nothing else) and router "
        "(AGENT_TOOLS_EVENTS__DIRECT_DELIVERY=false: each event also routed through the EventRouter)",
    )
    parser.add_argument(
        "--scales",
        default="1",
        help="worker processes and ingress processes of the burst, side by side in every round (e.g. 1,2): at "
        "scale N the sessions run on a queue N worker processes poll, and the POSTs go round robin to N ingress "
        "processes. Above 1 the workers run in processes of their own",
    )
    parser.add_argument(
        "--url",
        default=None,
        help="the store (default: SQLite in a temp dir), e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/bench_events "
        "for a database of the bench's own: every round writes under new project names",
    )
    parser.add_argument(
        "--worker-process",
        action="store_true",
        help="run the workers (ours and the raw reference's) in a process of their own, apart from the bench's "
        "HTTP client and polling: a profiler attached to it sees the worker alone. The ratios did not move "
        "with it",
    )
    return parser.parse_args()


def start_ingress(address: str, database_url: str, tokens: dict[str, str], path: str) -> tuple[Any, str]:
    """One ingress process (`agent-tools serve`), as docker-compose runs it: its own Temporal client and store."""
    port = free_port()
    env_vars = {
        **os.environ,
        "AGENT_TOOLS_TEMPORAL_ADDRESS": address,
        "AGENT_TOOLS_TASK_QUEUE": queue_for(1),
        "AGENT_TOOLS_DATABASE_URL": database_url,
        "AGENT_TOOLS_EVENTS__TOKENS": json.dumps(tokens),
        "AGENT_TOOLS_EVENTS__DIRECT_DELIVERY": "true" if path == "direct" else "false",
    }
    cmd = [sys.executable, "-c", "from agent_tools._cli import main; main()", "serve", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning"], env=env_vars)
    return proc, f"http://127.0.0.1:{port}"


async def main() -> None:
    args = parse_args()
    paths = [p for p in args.paths.split(",") if p]
    scales = sorted({int(x) for x in args.scales.split(",") if x})
    assert paths and set(paths) <= {"direct", "router"}, args.paths
    assert scales and scales[0] >= 1, args.scales
    sys.path.insert(0, str(ROOT))  # bench.bare_waiter, the raw reference

    tmp = Path(tempfile.mkdtemp(prefix="events-bench-"))
    wait = {"kind": "bench.tick", "match": {"n": "{{last_user}}"}, "timeout_seconds": 600}
    turns: list[dict[str, Any]] = [
        {"say": "", "tool_calls": [{"name": "wait_for_event", "arguments": wait}]},
        {"say": "done"},
    ]
    model = write_script(tmp / "script.json", turns)
    settings = Settings(
        database_url=args.url or f"sqlite+aiosqlite:///{tmp}/store.sqlite",
        task_queue=queue_for(1),
        agents_file=None,
        model=model,
    )
    env = await start_dev_server(ui=False)
    address = env.client.service_client.config.target_host
    plugin = AgentToolsPlugin(settings)
    temporal = await Client.connect(address, namespace=env.client.namespace, plugins=[plugin])
    # Phases of a round: the unloaded one at scale 1, the burst at every scale; raw and ours alternate per
    # phase, so the machine's noise falls on all, and the paths swap places every round.
    phases = [("unloaded", 1, args.unloaded, 1)] + [("burst", k, args.sessions, args.concurrency) for k in scales]
    rounds = [
        {(name, k, path): f"{name}-{path}-{uuid.uuid4().hex[:6]}" for name, k, _n, _c in phases for path in paths}
        for _ in range(args.rounds)
    ]
    tokens = {f"bench/{p}": f"{TOKEN}-{p}" for projects in rounds for p in projects.values()}  # one per project
    # One ingress process per delivery path and scale step: the burst at scale N posts to the first N.
    servers = {
        (path, j): start_ingress(address, settings.database_url, tokens, path)
        for path in paths
        for j in range(scales[-1])
    }
    results = []
    raw_results = []
    from contextlib import AsyncExitStack

    workers_procs: list[subprocess.Popen[bytes]] = []
    try:
        for _proc, base in servers.values():
            await wait_healthy(base)
        async with AsyncExitStack() as stack:
            if not args.worker_process and scales == [1]:
                # Both workers on the same server and in the bench's own process.
                await stack.enter_async_context(build_worker(temporal, plugin))
                await stack.enter_async_context(raw_reference_worker(temporal))
            else:
                # Worker process i polls the queues of the scales above i.
                for i in range(scales[-1]):
                    workers_procs.append(start_workers(env.client, settings, [k for k in scales if k > i]))
            https = {key: httpx.AsyncClient(base_url=base, timeout=60) for key, (_p, base) in servers.items()}
            clients = {
                k: AgentToolsClient(temporal, settings.model_copy(update={"task_queue": queue_for(k)})) for k in scales
            }
            for r, projects in enumerate(rounds):
                for name, k, n, conc in phases:
                    for path in paths[r % len(paths) :] + paths[: r % len(paths)]:
                        project = projects[(name, k, path)]
                        raw_results.append(await run_raw_phase(temporal, raw_queue(k), n, conc))
                        ingresses = [https[(path, j)] for j in range(k)]
                        phase = run_phase(
                            project, f"{TOKEN}-{project}", clients[k], ingresses, n, conc, path, args.other_waits
                        )
                        results.append(await measured_phase([servers[(path, j)][0] for j in range(k)], phase))
                        print_pair(results[-1], raw_results[-1])  # as it comes: a failed later round keeps it
            for client in clients.values():
                await client.close()
            for http in https.values():
                await http.aclose()
    finally:
        for proc in [*(p for p, _base in servers.values()), *workers_procs]:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:  # a loaded machine: the figures above are printed already
                proc.kill()
        await env.shutdown()
    report(results, raw_results, paths, scales)


async def measured_phase(ingresses: list[subprocess.Popen[Any]], phase: Awaitable[dict[str, Any]]) -> dict[str, Any]:
    """``phase``'s result with what it cost: the ingress processes' CPU per event, and how busy the machine's
    cores were meanwhile (the worker, the server and the bench share them with the ingress)."""
    from bench._processes import cpu_seconds, machine_ticks  # ROOT is on the path from main() on

    cpu_before = sum(cpu_seconds(p.pid) for p in ingresses)
    busy_before, all_before = machine_ticks()
    result = await phase
    busy, every = machine_ticks()
    result["ingress_cpu_ms_per_event"] = (
        (sum(cpu_seconds(p.pid) for p in ingresses) - cpu_before) * 1000 / result["sessions"]
    )
    result["machine_busy"] = (busy - busy_before) / max(every - all_before, 1)
    return result


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x (per round {' '.join(f'{x:.2f}' for x in values)})"


def rates(results: list[dict[str, Any]]) -> str:
    return " ".join(f"{r['reached_events_per_s']:.0f}" for r in results)


def print_pair(r: dict[str, Any], raw: dict[str, Any]) -> None:
    print(
        f"{r['phase']:>8}: raw signals to {raw['sessions']} bare waiting workflows, concurrency "
        f"{raw['concurrency']}, scale {r['scale']}: reached {raw['reached_events_per_s']:.0f}/s, done "
        f"{raw['delivered_events_per_s']:.0f}/s; signal -> in history p50 {raw['signal_ms_p50']:.0f} ms, "
        f"-> workflow done p50 {raw['latency_ms_p50']:.0f} ms"
    )
    print(
        f"{r['phase']:>8}: [{r['path']}] {r['sessions']} sessions, concurrency {r['concurrency']}, scale "
        f"{r['scale']}: ingress {r['ingress_events_per_s']:.0f} events/s, reached {r['reached_events_per_s']:.0f}"
        f"/s (next activity {r['activity_events_per_s']:.0f}/s, sessions done {r['delivered_events_per_s']:.0f}/s); "
        f"POST -> signal in the session p50 {r['signal_ms_p50']:.0f} ms, -> next activity p50 "
        f"{r['latency_ms_p50']:.0f} ms, p95 {r['latency_ms_p95']:.0f} ms, -> session completed p50 "
        f"{r['done_ms_p50']:.0f} ms"
    )
    print(
        f"{'':>8}  events/raw: reached {r['reached_events_per_s'] / raw['reached_events_per_s']:.2f}x "
        f"(target >= 0.5x), sessions done {r['delivered_events_per_s'] / raw['delivered_events_per_s']:.2f}x, "
        f"signal p50 latency {r['signal_ms_p50'] / raw['signal_ms_p50']:.2f}x; ingress CPU "
        f"{r['ingress_cpu_ms_per_event']:.1f} ms per event, cores busy {r['machine_busy']:.0%} during the phase"
    )


def report(
    results: list[dict[str, Any]], raw_results: list[dict[str, Any]], paths: list[str], scales: list[int]
) -> None:
    pairs = list(zip(results, raw_results, strict=True))
    for phase, k in [("unloaded", 1)] + [("burst", k) for k in scales]:
        for path in paths:
            mine = [(r, raw) for r, raw in pairs if r["phase"] == phase and r["path"] == path and r["scale"] == k]
            reached = [r["reached_events_per_s"] / raw["reached_events_per_s"] for r, raw in mine]
            done = [r["delivered_events_per_s"] / raw["delivered_events_per_s"] for r, raw in mine]
            lat = [r["signal_ms_p50"] / raw["signal_ms_p50"] for r, raw in mine]
            print(
                f"{phase:>8} [{path}] scale {k}, medians of {len(mine)} rounds: events/raw reached {spread(reached)} "
                f"(target >= 0.5x), sessions done {spread(done)}, signal p50 latency {spread(lat)}; reached "
                f"{rates([r for r, _ in mine])}/s, raw "
                f"{rates([raw for _, raw in mine])}/s; ingress CPU per event "
                f"{' '.join(format(r['ingress_cpu_ms_per_event'], '.1f') for r, _ in mine)} ms, cores busy "
                f"{' '.join(format(r['machine_busy'], '.0%') for r, _ in mine)}"
            )
    for path in paths:
        one = [r for r in results if r["phase"] == "burst" and r["path"] == path and r["scale"] == 1]
        for k in scales[1:]:
            more = [r for r in results if r["phase"] == "burst" and r["path"] == path and r["scale"] == k]
            reached = [b["reached_events_per_s"] / a["reached_events_per_s"] for a, b in zip(one, more, strict=True)]
            done = [b["delivered_events_per_s"] / a["delivered_events_per_s"] for a, b in zip(one, more, strict=True)]
            print(
                f"   burst [{path}] scale {k} / scale 1, same rounds: reached {spread(reached)} (target >= 1.6x), "
                f"sessions done {spread(done)}"
            )


if __name__ == "__main__":
    from agent_tools._process_exit import run_and_exit

    if sys.argv[1:2] == ["--worker"]:
        sys.path.insert(0, str(ROOT))  # bench.bare_waiter
        run_and_exit(lambda: asyncio.run(run_workers(*sys.argv[2:7])))
    else:
        run_and_exit(lambda: asyncio.run(main()))
