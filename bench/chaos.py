"""Recovery from killed workers: N sessions on two worker processes, with and without a killer.

    python bench/chaos.py                       # 120 sessions, 3 alternating rounds of fault-free / chaos
    python bench/chaos.py --sessions 40 --rounds 3 --turns 6 --step-seconds 0.5
    python bench/chaos.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/bench   # the store on PostgreSQL
    python bench/chaos.py --variant previous --variant 'fast={"heartbeat": 3, "sticky": 2}' --gaps
                                                # timeout variants, interleaved against one fault-free run
    python bench/chaos.py --replay-steps 290 --replay-sessions 2   # how long a new worker replays big sessions

Each run starts two worker processes (``agent_tools._worker.build_worker``, the production worker settings)
on a fresh task queue and store, and N sessions at once. Every session runs ``--turns`` model steps that
each take ``--step-seconds`` and call one tool, then answers. In a chaos run a killer SIGKILLs one of the
two workers (picked at random) every 3-8 s and starts a new one in its place, as a supervisor would, until
every session has ended; a kill that falls due while a replacement is still starting waits for it (on a
loaded machine a start can take longer than the interval, and two starting workers would only measure
start-up). The runs alternate (fault-free, chaos, fault-free, ...), so the machine's noise
falls on both, and the bench prints each round's wall time, the chaos/fault-free ratio of each round and of
the medians, how many activity attempts the kills cost, and a transcript comparison: every chaos session's
transcript (role, text, tool calls, in order) must equal the fault-free run's, with no entry lost or
doubled. It exits non-zero when a session did not complete or a transcript differs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def write_script(path: Path, turns: int, step_seconds: float) -> str:
    steps: list[dict[str, Any]] = [
        {
            "say": f"step {i}",
            "delay_seconds": step_seconds,
            "tool_calls": [{"name": "lookup", "arguments": {"topic": f"t{i}"}}],
        }
        for i in range(turns)
    ]
    steps.append({"say": "done", "delay_seconds": step_seconds})
    path.write_text(json.dumps({"conversations": [{"turns": steps}]}))
    return f"scripted:{path}"


# ---- worker process -----------------------------------------------------------------------------------


# The timeouts a run may set instead of the code's defaults (``--variant NAME=JSON``); every key is optional.
#   heartbeat: model steps' and tools' heartbeat timeout (s)   retry_initial: their first retry interval (s)
#   sticky: the sticky queue's schedule-to-start timeout (s)   throttle: the longest heartbeat throttle (s)
#   task_timeout: the sessions' workflow task timeout (s)
VARIANT_KEYS = {"heartbeat", "retry_initial", "sticky", "throttle", "task_timeout"}
# The SDK's default timeouts: 30 s heartbeat timeouts, the SDK's 10 s sticky timeout and 60 s throttle.
LEGACY = {"heartbeat": 30.0, "sticky": 10.0, "throttle": 60.0, "task_timeout": 10.0, "retry_initial": 1.0}
# The first shortened timeouts: 5 s heartbeats, 3 s sticky, 2 s throttle, Temporal's 10 s task.
PREVIOUS = {"heartbeat": 5.0, "sticky": 3.0, "throttle": 2.0, "task_timeout": 10.0, "retry_initial": 1.0}


def variant_policy(variant: dict[str, float]) -> Any:
    from agent_tools._policy import ExecutionPolicy

    call: dict[str, float] = {}
    if "heartbeat" in variant:
        call["heartbeat_seconds"] = variant["heartbeat"]
    if "retry_initial" in variant:
        call["initial_interval_seconds"] = variant["retry_initial"]
    override: dict[str, Any] = {"model_step": call, "tool_call": call} if call else {}
    if "task_timeout" in variant:
        override["workflow_task_timeout_seconds"] = variant["task_timeout"]
    return ExecutionPolicy().merged(override)


async def worker_main(address: str, task_queue: str, db: str, variant: dict[str, float]) -> None:
    from temporalio.client import Client

    from agent_tools._plugin import AgentToolsPlugin
    from agent_tools._settings import Settings
    from agent_tools._user_tools import make_user_tool
    from agent_tools._worker import build_worker
    from bench.bare_loop import lookup

    settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, agents_file=None)
    extra: dict[str, Any] = {}
    if "sticky" in variant:
        extra["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=variant["sticky"])
    if "throttle" in variant:
        extra["max_heartbeat_throttle_interval"] = timedelta(seconds=variant["throttle"])
    plugin = AgentToolsPlugin(settings, tools=[make_user_tool(lookup)], policy=variant_policy(variant))
    client = await Client.connect(address, plugins=[plugin])
    worker = build_worker(client, plugin, **extra)
    print("ready", flush=True)
    await worker.run()


# ---- driver --------------------------------------------------------------------------------------------


@dataclass
class Workers:
    """The two worker processes of a run; a killed one is replaced at once."""

    address: str
    task_queue: str
    db: str
    variant: dict[str, float] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    kills: int = 0
    ready: dict[int, threading.Event] = field(default_factory=dict)
    # Seconds the killer waited for a replacement to start before its next kill.
    waited: float = 0.0
    # The reference's workers (bench/bare_chaos.py) instead of ours.
    bare: bool = False
    # Seconds from spawn to "ready" of each worker started (a replacement is one worker fewer until then).
    startups: list[float] = field(default_factory=list)

    def spawn(self) -> subprocess.Popen[bytes]:
        args = [sys.executable, __file__, "--worker", "--address", self.address, "--task-queue", self.task_queue]
        args += ["--variant-json", json.dumps(self.variant), *(["--bare"] if self.bare else [])]
        proc = subprocess.Popen([*args, "--db", self.db], stdout=subprocess.PIPE, cwd=ROOT)
        # The worker prints "ready" when it starts polling; a thread reads it so the killer can wait for it.
        self.ready[proc.pid] = threading.Event()
        threading.Thread(target=self._watch, args=(proc, time.perf_counter()), daemon=True).start()
        return proc

    def _watch(self, proc: subprocess.Popen[bytes], spawned: float) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == b"ready":
                self.startups.append(time.perf_counter() - spawned)
                self.ready[proc.pid].set()

    async def wait_ready(self) -> float:
        """Until every worker polls (a replacement can take longer to start than the next kill is due on a
        loaded machine, and killing both workers while they start would only measure start-up); the wait."""
        t0 = time.perf_counter()
        for proc in self.procs:
            # Bounded waits: a thread blocked for good would hold up the event loop's shutdown.
            while not await asyncio.to_thread(self.ready[proc.pid].wait, 0.2):
                pass
        return time.perf_counter() - t0

    def start(self) -> None:
        self.procs = [self.spawn(), self.spawn()]

    def kill_one(self, rng: random.Random) -> None:
        i = rng.randrange(len(self.procs))
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.kills += 1
        self.procs[i] = self.spawn()

    def stop(self) -> None:
        stop_processes(self.procs)


def stop_processes(procs: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM to every live one, then a wait; SIGKILL to one that outlives 30 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class RunResult:
    wall_s: float
    kills: int
    retried_activities: int
    failed: list[str]
    transcripts: dict[int, list[tuple[Any, ...]]]
    # Seconds sessions spent in gaps over a second between two history events, by the pair of event types:
    # where the kills cost time (a heartbeat timeout, a workflow task timeout, a sticky queue's timeout).
    gaps: dict[str, float]
    # Seconds from scheduled to started of every workflow task on a worker's sticky queue that a worker took
    # (the margin a shorter sticky timeout would eat into), and how many activity attempts timed out on their
    # heartbeats (in a fault-free run each is a live worker taken for dead; only an activity's last retry is recorded).
    sticky_pickups: list[float] = field(default_factory=list)
    heartbeat_timeouts: int = 0
    killer_waited: float = 0.0
    startups: list[float] = field(default_factory=list)


async def one_run(
    args: argparse.Namespace, address: str, chaos: bool, workdir: Path, seed: int, variant: dict[str, float]
) -> RunResult:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from agent_tools._client import AgentToolsClient
    from agent_tools._session import SessionStatus
    from agent_tools._settings import Settings

    task_queue = f"chaos-{'k' if chaos else 'f'}-{uuid.uuid4().hex[:8]}"
    db = args.db or f"sqlite+aiosqlite:///{workdir}/{task_queue}.sqlite"
    model = write_script(workdir / "script.json", args.turns, args.step_seconds)
    # The driver starts the sessions: the workflow task timeout is a start option, read from this policy.
    settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, agents_file=None,
                        policy=variant_policy(variant))  # fmt: skip
    workers = Workers(address, task_queue, db, variant=variant)
    temporal = await Client.connect(address, data_converter=pydantic_data_converter)
    client = AgentToolsClient(temporal, settings)
    rng = random.Random(seed)
    workers.start()
    try:
        t0 = time.perf_counter()
        handles = [
            await client.start_session("research", session_id=f"{task_queue}-{i}", model=model, tools=["lookup"],
                                       max_steps=args.turns + 1)
            for i in range(args.sessions)
        ]  # fmt: skip

        kill_task = asyncio.create_task(killer(args, workers, rng)) if chaos else None
        try:
            results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=args.timeout)
        finally:
            if kill_task is not None:
                kill_task.cancel()
        wall = time.perf_counter() - t0
        failed = [h.session_id for h, r in zip(handles, results, strict=True) if r.status != SessionStatus.completed]
        transcripts: dict[int, list[tuple[Any, ...]]] = {}
        for i, h in enumerate(handles):
            entries = await h.transcript(limit=500)
            if [e.seq for e in entries] != list(range(len(entries))):
                failed.append(f"{h.session_id}: transcript seqs {[e.seq for e in entries]}")
            transcripts[i] = [
                (e.role, e.content, e.name, json.dumps([(c.get("name"), c.get("arguments")) for c in e.tool_calls]))
                for e in entries
            ]
        run = analyse([await h.workflow.fetch_history() for h in handles])
    finally:
        workers.stop()
        await client.close()
    return RunResult(wall, workers.kills, run.retried_activities, failed, transcripts, run.gaps, run.sticky_pickups,
                     run.heartbeat_timeouts, workers.waited, workers.startups)  # fmt: skip


async def killer(args: argparse.Namespace, workers: Workers, rng: random.Random) -> None:
    """SIGKILLs one of the workers every kill-min..kill-max s and replaces it; ``rng`` (seeded by the round)
    picks the intervals and the victims, so our run and the reference's of a round get the same schedule."""
    while True:
        await asyncio.sleep(rng.uniform(args.kill_min, args.kill_max))
        workers.waited += await workers.wait_ready()
        workers.kill_one(rng)


async def bare_run(
    args: argparse.Namespace, address: str, chaos: bool, seed: int, variant: dict[str, float]
) -> RunResult:
    """One run of the reference (bench/bare_chaos.py) with our production timeouts and the same kill schedule."""
    from temporalio.client import Client

    from bench.bare_chaos import BareChaosInput, BareChaosLoop, BareChaosResult, CallTimeouts

    policy = variant_policy(variant)

    def timeouts(call: Any) -> CallTimeouts:
        return CallTimeouts(call.start_to_close_seconds, call.heartbeat_seconds, call.initial_interval_seconds,
                            call.backoff_coefficient, call.maximum_interval_seconds, call.maximum_attempts)  # fmt: skip

    from agent_tools._worker import HEARTBEAT_THROTTLE_SECONDS, STICKY_TIMEOUT_SECONDS

    task_queue = f"bare-{'k' if chaos else 'f'}-{uuid.uuid4().hex[:8]}"
    worker_variant = {"sticky": STICKY_TIMEOUT_SECONDS, "throttle": HEARTBEAT_THROTTLE_SECONDS, **variant}
    workers = Workers(address, task_queue, "", variant=worker_variant, bare=True)
    temporal = await Client.connect(address)
    rng = random.Random(seed)
    workers.start()
    try:
        t0 = time.perf_counter()
        inp = BareChaosInput("research", args.turns, args.step_seconds, timeouts(policy.model_step),
                             timeouts(policy.tool_call))  # fmt: skip
        handles = [
            await temporal.start_workflow(BareChaosLoop.run, inp, id=f"{task_queue}-{i}", task_queue=task_queue,
                                          task_timeout=timedelta(seconds=policy.workflow_task_timeout_seconds))
            for i in range(args.sessions)
        ]  # fmt: skip
        kill_task = asyncio.create_task(killer(args, workers, rng)) if chaos else None
        try:
            results: list[BareChaosResult] = await asyncio.wait_for(
                asyncio.gather(*(h.result() for h in handles)), timeout=args.timeout
            )
        finally:
            if kill_task is not None:
                kill_task.cancel()
        wall = time.perf_counter() - t0
        transcripts = {
            i: [(m["role"], m["content"], m.get("name"), json.dumps(m.get("tool_calls", []))) for m in r.messages]
            for i, r in enumerate(results)
        }
        failed = [f"{h.id}: {len(r.messages)} messages" for h, r in zip(handles, results, strict=True)
                  if len(r.messages) != 3 + 2 * args.turns]  # fmt: skip
        run = analyse([await h.fetch_history() for h in handles])
    finally:
        workers.stop()
    return RunResult(wall, workers.kills, run.retried_activities, failed, transcripts, run.gaps, run.sticky_pickups,
                     run.heartbeat_timeouts, workers.waited, workers.startups)  # fmt: skip


def analyse(histories: list[Any]) -> RunResult:
    """What the histories of a run say: activity retries, where sessions waited, sticky pickups, heartbeat
    timeouts (the rest of the result left empty)."""
    from temporalio.api.enums.v1 import TaskQueueKind, TimeoutType

    retried = 0
    gaps: dict[str, float] = {}
    pickups: list[float] = []
    heartbeat_timeouts = 0
    for history in histories:
        retried += sum(
            1
            for e in history.events
            if e.HasField("activity_task_started_event_attributes")
            and e.activity_task_started_event_attributes.attempt > 1
        )
        sticky_at: dict[int, Any] = {}
        for e in history.events:
            if e.HasField("workflow_task_scheduled_event_attributes"):
                if e.workflow_task_scheduled_event_attributes.task_queue.kind == TaskQueueKind.TASK_QUEUE_KIND_STICKY:
                    sticky_at[e.event_id] = e.event_time.ToDatetime()
            elif e.HasField("workflow_task_started_event_attributes"):
                at = sticky_at.get(e.workflow_task_started_event_attributes.scheduled_event_id)
                if at is not None:
                    pickups.append((e.event_time.ToDatetime() - at).total_seconds())
            elif e.HasField("activity_task_started_event_attributes"):
                # A retried attempt's start names the failure of the attempt before it.
                last = e.activity_task_started_event_attributes.last_failure.timeout_failure_info
                heartbeat_timeouts += last.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT
        for a, b in itertools.pairwise(history.events):
            gap = b.event_time.ToDatetime() - a.event_time.ToDatetime()
            if gap.total_seconds() > 1:
                key = f"{event_name(a.event_type)} -> {event_name(b.event_type)}"
                gaps[key] = gaps.get(key, 0.0) + gap.total_seconds()
    return RunResult(0.0, 0, retried, [], {}, gaps, sorted(pickups), heartbeat_timeouts)


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile of sorted ``values`` (nearest rank); 0 for none."""
    if not values:
        return 0.0
    return values[min(len(values) - 1, max(0, round(p / 100 * len(values)) - 1))]


def event_name(event_type: int) -> str:
    from temporalio.api.enums.v1 import EventType

    return EventType.Name(event_type).removeprefix("EVENT_TYPE_").lower()


def compare(reference: RunResult, other: RunResult) -> list[str]:
    """Sessions whose transcript differs from the fault-free run's (the same session index, the same script)."""
    diffs = []
    for i, entries in reference.transcripts.items():
        theirs = other.transcripts.get(i)
        if theirs != entries:
            n = len(theirs or [])
            diffs.append(f"session {i}: {n} entries vs {len(entries)} in the fault-free run")
    return diffs


async def driver(args: argparse.Namespace) -> int:
    from agent_tools._devserver import start_dev_server

    env = await start_dev_server(ui=False, log_level="error")
    address = env.client.service_client.config.target_host
    variants: dict[str, dict[str, float]] = dict(args.variants) or {"defaults": {}}
    free: list[RunResult] = []
    chaos: dict[str, list[RunResult]] = {name: [] for name in variants}
    problems: list[str] = []
    bare: list[tuple[RunResult, RunResult]] = []
    print(
        f"{args.sessions} sessions x {args.turns} tool steps of {args.step_seconds} s, two workers; "
        f"chaos: one worker SIGKILLed every {args.kill_min}-{args.kill_max} s and replaced",
        flush=True,
    )
    for name, variant in variants.items():
        print(f"  {name}: {json.dumps(variant) if variant else 'the code defaults'}", flush=True)
    first = next(iter(variants.values()))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                # One fault-free run per round (with the first variant's timeouts, which a run without faults
                # never waits for), then every variant's chaos run with the same kill schedule.
                free.append(await one_run(args, address, False, Path(tmp), seed=r, variant=first))
                f = free[-1]
                problems += f.failed
                print(f"  round {r + 1}: fault-free {f.wall_s:6.1f} s ({f.retried_activities} activity retries, "
                      f"{f.heartbeat_timeouts} heartbeat timeouts; sticky tasks picked up after p50 "
                      f"{percentile(f.sticky_pickups, 50):.3f} s, p99 {percentile(f.sticky_pickups, 99):.3f} s, "
                      f"max {percentile(f.sticky_pickups, 100):.3f} s)", flush=True)  # fmt: skip
                for name, variant in variants.items():
                    chaos[name].append(await one_run(args, address, True, Path(tmp), seed=r, variant=variant))
                    problems += k_report(args, name, f, chaos[name][-1])
                if args.reference:
                    problems += await reference_round(args, address, r, first, bare)
    finally:
        await env.shutdown()
    mf = statistics.median(f.wall_s for f in free)
    print(f"\nmedian wall: fault-free {mf:.1f} s")
    for name, runs in chaos.items():
        ratios = [k.wall_s / f.wall_s for f, k in zip(free, runs, strict=True)]
        mk = statistics.median(k.wall_s for k in runs)
        print(
            f"  {name:>12}: chaos {mk:.1f} s -> ratio {mk / mf:.2f}x (per round {' '.join(f'{x:.2f}' for x in ratios)};"
            f" spread {min(ratios):.2f}-{max(ratios):.2f}; target <= 1.5x)"
        )
    if bare:
        print_reference(free, chaos[next(iter(chaos))], bare)
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems[:20]))
        return 1
    print("every session completed; every chaos transcript equals the fault-free one")
    return 0


def k_report(args: argparse.Namespace, name: str, f: RunResult, k: RunResult) -> list[str]:
    """Prints a chaos run against its fault-free run (and with ``--gaps`` where it waited); its problems."""
    diffs = compare(f, k)
    print(
        f"    {name:>12}: chaos {k.wall_s:6.1f} s ({k.kills} kills after waiting {k.killer_waited:.0f} s for"
        f" replacements, {k.retried_activities} activity retries, {k.heartbeat_timeouts} on heartbeats; sticky"
        f" pickup p99 {percentile(k.sticky_pickups, 99):.3f} s; workers up {startup(k)})   ratio"
        f" {k.wall_s / f.wall_s:.2f}x   transcripts differing: {len(diffs)}/{len(f.transcripts)}",
        flush=True,
    )
    if args.gaps:
        print_gaps(args, f, k)
    return k.failed + diffs


def startup(run: RunResult) -> str:
    """How long the run's workers took from spawn to polling: median and max."""
    if not run.startups:
        return "-"
    return f"after median {statistics.median(run.startups):.1f} s, max {max(run.startups):.1f} s"


def print_gaps(args: argparse.Namespace, free: RunResult, chaos: RunResult) -> None:
    extra = {key: secs - free.gaps.get(key, 0.0) for key, secs in chaos.gaps.items()}
    for key, secs in sorted(extra.items(), key=lambda kv: -kv[1])[:6]:
        print(f"      +{secs / args.sessions:5.2f} s/session more than fault-free between {key}")


async def reference_round(
    args: argparse.Namespace, address: str, r: int, variant: dict[str, float], out: list[tuple[RunResult, RunResult]]
) -> list[str]:
    """The bare loop's fault-free and chaos runs of round ``r`` (the same kill schedule as ours); problems."""
    f = await bare_run(args, address, False, seed=r, variant=variant)
    k = await bare_run(args, address, True, seed=r, variant=variant)
    out.append((f, k))
    return f.failed + k_report(args, f"bare loop (fault-free {f.wall_s:.1f} s)", f, k)


def print_reference(free: list[RunResult], chaos: list[RunResult], bare: list[tuple[RunResult, RunResult]]) -> None:
    """Our recovery ratio over the bare loop's, per round (each pair of runs interleaved) and of the medians."""
    ours = [k.wall_s / f.wall_s for f, k in zip(free, chaos, strict=True)]
    theirs = [k.wall_s / f.wall_s for f, k in bare]
    per_round = [a / b for a, b in zip(ours, theirs, strict=True)]
    mf, mk = statistics.median(f.wall_s for f, _ in bare), statistics.median(k.wall_s for _, k in bare)
    ratio = statistics.median(k.wall_s for k in chaos) / statistics.median(f.wall_s for f in free)
    print(
        f"     bare loop: fault-free {mf:.1f} s, chaos {mk:.1f} s -> ratio {mk / mf:.2f}x (per round "
        f"{' '.join(f'{x:.2f}' for x in theirs)})\n"
        f"  our recovery ratio / the bare loop's: {ratio / (mk / mf):.2f}x (per round "
        f"{' '.join(f'{x:.2f}' for x in per_round)}; spread {min(per_round):.2f}-{max(per_round):.2f}; target <= 1.2x)"
    )


async def replay_cost(args: argparse.Namespace) -> int:
    """How long a worker that takes over large sessions holds the workflow task that replays them.

    ``--replay-sessions`` sessions of ``--replay-steps`` tool steps each (no delay) run on one worker and go
    idle (chats waiting for the next message); then, ``--rounds`` times, that worker is SIGKILLed, a new
    one started, and every session sent a message at once: the new worker has none of them cached, so its
    first workflow task of each replays the whole history. The figure is that task's time from started to
    completed (what the workflow task timeout bounds), read from the history.
    """
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from agent_tools._client import AgentToolsClient
    from agent_tools._devserver import start_dev_server
    from agent_tools._errors import StoreNotReady
    from agent_tools._settings import Settings

    env = await start_dev_server(ui=False, log_level="error")
    address = env.client.service_client.config.target_host
    task_queue = f"replay-{uuid.uuid4().hex[:8]}"
    first = next(iter(dict(args.variants).values()), {})
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = args.db or f"sqlite+aiosqlite:///{tmp}/store.sqlite"
            model = write_script(Path(tmp) / "script.json", args.replay_steps, 0.0)
            settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, agents_file=None,
                                policy=variant_policy(first))  # fmt: skip
            temporal = await Client.connect(address, data_converter=pydantic_data_converter)
            client = AgentToolsClient(temporal, settings)
            workers = Workers(address, task_queue, db, variant=first)
            workers.procs = [workers.spawn()]
            t0 = time.perf_counter()
            handles = [
                await client.start_session(
                    "research",
                    session_id=f"{task_queue}-{i}",
                    model=model,
                    tools=["lookup"],
                    max_steps=args.replay_steps + 1,
                    keep_alive=True,
                )
                for i in range(args.replay_sessions)
            ]

            for h in handles:  # each has answered: its transcript holds the final message
                for _ in range(args.timeout):
                    with contextlib.suppress(StoreNotReady):  # until the worker has created the store
                        if await h.transcript(offset=2 * args.replay_steps + 1, limit=5):
                            break
                    await asyncio.sleep(1)
            await asyncio.sleep(2)
            history = await handles[0].workflow.fetch_history()
            size = sum(e.ByteSize() for e in history.events)
            print(
                f"{args.replay_sessions} sessions of {args.replay_steps} tool steps each, built in "
                f"{time.perf_counter() - t0:.0f} s: {len(history.events)} history events, {size / 1e6:.2f} MB each",
                flush=True,
            )
            started_type = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
            done_types = {EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
                          EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED}  # fmt: skip
            for r in range(args.rounds):
                workers.kill_one(random.Random(r))  # one worker: kills it and starts its replacement
                marks = [len((await h.workflow.fetch_history()).events) for h in handles]
                await asyncio.sleep(args.replay_wait)  # the replacement is up and polling
                await asyncio.gather(*(h.send_signal(f"again {r}") for h in handles))
                await asyncio.sleep(2)
                held: list[float] = []
                timed_out = 0
                for h, mark in zip(handles, marks, strict=True):
                    for _ in range(args.timeout):
                        events = (await h.workflow.fetch_history()).events[mark:]
                        if any(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED for e in events):
                            break
                        await asyncio.sleep(1)
                    # The first started task and the end of that attempt (its completion, or a start-to-close
                    # timeout or a failure: those attempts count as lost); sticky schedule-to-start timeouts
                    # before it are the dead worker's queue.
                    started = next(i for i, e in enumerate(events) if e.event_type == started_type)
                    end = next(e for e in events[started:] if e.event_type in done_types)
                    held.append((end.event_time.ToDatetime() - events[started].event_time.ToDatetime()).total_seconds())
                    for e in events[started:]:
                        if e.event_type in done_types and e.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                            timed_out += 1
                            if args.gaps:
                                print(f"      {event_name(e.event_type)}: {e}", flush=True)
                held.sort()
                print(
                    f"  round {r + 1}: the replaying workflow task took median {statistics.median(held):.2f} s, "
                    f"max {held[-1]:.2f} s over {len(held)} sessions; attempts timed out or failed after starting: {timed_out}",
                    flush=True,
                )
            workers.stop()
            await client.close()
    finally:
        await env.shutdown()
    return 0


def parse_variant(text: str) -> tuple[str, dict[str, float]]:
    named = {"legacy": LEGACY, "previous": PREVIOUS, "defaults": {}}
    name, _, spec = text.partition("=")
    if not spec:
        if name not in named:
            raise argparse.ArgumentTypeError(f"{name!r}: give NAME=JSON, or one of {sorted(named)}")
        return name, dict(named[name])
    try:
        variant = json.loads(spec)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{name}: not JSON: {exc}") from None
    if not isinstance(variant, dict) or not set(variant) <= VARIANT_KEYS:
        raise argparse.ArgumentTypeError(f"{name}: a JSON object with keys among {sorted(VARIANT_KEYS)}")
    if not all(isinstance(v, int | float) and v > 0 for v in variant.values()):
        raise argparse.ArgumentTypeError(f"{name}: every value is a positive number of seconds")
    return name, {k: float(v) for k, v in variant.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--address")
    parser.add_argument("--task-queue")
    parser.add_argument("--db", help="store URL shared by both workers (default: a fresh SQLite file per run)")
    parser.add_argument("--sessions", type=int, default=120)
    parser.add_argument("--turns", type=int, default=6, help="tool-calling model steps per session")
    parser.add_argument("--step-seconds", type=float, default=1.0, help="how long each model step takes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kill-min", type=float, default=3.0)
    parser.add_argument("--kill-max", type=float, default=8.0)
    parser.add_argument(
        "--variant",
        dest="variants",
        action="append",
        type=parse_variant,
        default=[],
        help="timeouts of a chaos run, NAME=JSON (keys: " + ", ".join(sorted(VARIANT_KEYS)) + ") or one of "
        "defaults, previous (the first shortened timeouts), legacy (the SDK's defaults); repeat to compare them "
        "interleaved, each round's fault-free run shared (default: the code's defaults)",
    )
    parser.add_argument(
        "--legacy-timeouts", action="store_true", help="the same as --variant legacy --variant defaults"
    )
    parser.add_argument("--variant-json", help=argparse.SUPPRESS)
    parser.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also run the bare loop (bench/bare_chaos.py) each round, with the same timeouts and kill schedule",
    )
    parser.add_argument(
        "--replay-steps", type=int, help="instead: time the workflow task that replays sessions of this many steps"
    )
    parser.add_argument("--replay-sessions", type=int, default=1, help="with --replay-steps: how many at once")
    parser.add_argument("--replay-wait", type=float, default=5.0, help="seconds the replacement worker gets to start")
    parser.add_argument("--gaps", action="store_true", help="print where the chaos runs' sessions waited")
    parser.add_argument("--timeout", type=int, default=900, help="seconds a run may take before it fails")
    args = parser.parse_args()
    if args.worker and args.bare:
        from bench.bare_chaos import run_worker

        v = json.loads(args.variant_json)
        asyncio.run(run_worker(args.address, args.task_queue, v["sticky"], v["throttle"], 200))
        return
    if args.worker:
        asyncio.run(worker_main(args.address, args.task_queue, args.db, json.loads(args.variant_json or "{}")))
        return
    if args.legacy_timeouts:
        args.variants = [parse_variant("legacy"), parse_variant("defaults"), *args.variants]
    if args.rounds < 1 or args.sessions < 1 or args.turns < 1 or not 0 < args.kill_min <= args.kill_max:
        parser.error("--rounds, --sessions and --turns must be positive, and 0 < --kill-min <= --kill-max")
    if args.replay_steps:
        sys.exit(asyncio.run(replay_cost(args)))
    sys.exit(asyncio.run(driver(args)))


if __name__ == "__main__":
    # The worker processes die by SIGKILL or SIGTERM; only the driver needs the clean exit helper.
    if "--worker" in sys.argv:
        main()
    else:
        from agent_tools._process_exit import run_and_exit

        run_and_exit(main)
