"""Recovery from killed workers: N sessions on two worker processes, with and without a killer.

    python bench/chaos.py                       # 120 sessions, 3 alternating rounds of fault-free / chaos
    python bench/chaos.py --sessions 40 --rounds 3 --turns 6 --step-seconds 0.5
    python bench/chaos.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/bench   # the store on PostgreSQL

Each run starts two worker processes (``agent_tools.worker.build_worker``, the production worker settings)
on a fresh task queue and store, and N sessions at once. Every session runs ``--turns`` model steps that
each take ``--step-seconds`` and call one tool, then answers. In a chaos run a killer SIGKILLs one of the
two workers (picked at random) every 3-8 s and starts a new one in its place, as a supervisor would, until
every session has ended. The runs alternate (fault-free, chaos, fault-free, ...), so the machine's noise
falls on both, and the bench prints each round's wall time, the chaos/fault-free ratio of each round and of
the medians, how many activity attempts the kills cost, and a transcript comparison: every chaos session's
transcript (role, text, tool calls, in order) must equal the fault-free run's, with no entry lost or
doubled. It exits non-zero when a session did not complete or a transcript differs.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
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


async def worker_main(address: str, task_queue: str, db: str, legacy: bool) -> None:
    from temporalio.client import Client

    from agent_tools.plugin import AgentToolsPlugin
    from agent_tools.settings import Settings
    from agent_tools.user_tools import make_user_tool
    from agent_tools.worker import build_worker
    from bench.bare_loop import lookup

    settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, agents_file=None)
    policy = None
    extra: dict[str, Any] = {}
    if legacy:
        # The timeouts before issue 18: 30 s heartbeat timeouts, the SDK's 10 s sticky queue timeout and
        # heartbeat throttling.
        from agent_tools.policy import ExecutionPolicy

        slow = {"heartbeat_seconds": 30.0}
        policy = ExecutionPolicy().merged({"model_step": slow, "tool_call": slow})
        extra["sticky_queue_schedule_to_start_timeout"] = timedelta(seconds=10)
        extra["max_heartbeat_throttle_interval"] = timedelta(seconds=60)
    plugin = AgentToolsPlugin(settings, tools=[make_user_tool(lookup)], policy=policy)
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
    legacy: bool = False
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    kills: int = 0

    def spawn(self) -> subprocess.Popen[bytes]:
        args = [sys.executable, __file__, "--worker", "--address", self.address, "--task-queue", self.task_queue]
        if self.legacy:
            args += ["--legacy-timeouts"]
        return subprocess.Popen([*args, "--db", self.db], stdout=subprocess.DEVNULL, cwd=ROOT)

    def start(self) -> None:
        self.procs = [self.spawn(), self.spawn()]

    def kill_one(self, rng: random.Random) -> None:
        i = rng.randrange(len(self.procs))
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.kills += 1
        self.procs[i] = self.spawn()

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
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


async def one_run(args: argparse.Namespace, address: str, chaos: bool, workdir: Path, seed: int) -> RunResult:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from agent_tools.client import AgentToolsClient
    from agent_tools.session import SessionStatus
    from agent_tools.settings import Settings

    task_queue = f"chaos-{'k' if chaos else 'f'}-{uuid.uuid4().hex[:8]}"
    db = args.db or f"sqlite+aiosqlite:///{workdir}/{task_queue}.sqlite"
    model = write_script(workdir / "script.json", args.turns, args.step_seconds)
    settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, agents_file=None)
    workers = Workers(address, task_queue, db, legacy=args.legacy_timeouts)
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

        async def killer() -> None:
            while True:
                await asyncio.sleep(rng.uniform(args.kill_min, args.kill_max))
                workers.kill_one(rng)

        kill_task = asyncio.create_task(killer()) if chaos else None
        try:
            results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=args.timeout)
        finally:
            if kill_task is not None:
                kill_task.cancel()
        wall = time.perf_counter() - t0
        failed = [h.session_id for h, r in zip(handles, results, strict=True) if r.status != SessionStatus.completed]
        transcripts: dict[int, list[tuple[Any, ...]]] = {}
        retried = 0
        gaps: dict[str, float] = {}
        for i, h in enumerate(handles):
            entries = await h.transcript(limit=500)
            if [e.seq for e in entries] != list(range(len(entries))):
                failed.append(f"{h.session_id}: transcript seqs {[e.seq for e in entries]}")
            transcripts[i] = [
                (e.role, e.content, e.name, json.dumps([(c.get("name"), c.get("arguments")) for c in e.tool_calls]))
                for e in entries
            ]
            history = await h.workflow.fetch_history()
            retried += sum(
                1
                for e in history.events
                if e.HasField("activity_task_started_event_attributes")
                and e.activity_task_started_event_attributes.attempt > 1
            )
            for a, b in itertools.pairwise(history.events):
                gap = b.event_time.ToDatetime() - a.event_time.ToDatetime()
                if gap.total_seconds() > 1:
                    key = f"{event_name(a.event_type)} -> {event_name(b.event_type)}"
                    gaps[key] = gaps.get(key, 0.0) + gap.total_seconds()
    finally:
        workers.stop()
        await client.close()
    return RunResult(wall, workers.kills, retried, failed, transcripts, gaps)


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
    from agent_tools.devserver import start_dev_server

    env = await start_dev_server(ui=False, log_level="error")
    address = env.client.service_client.config.target_host
    free: list[RunResult] = []
    chaos: list[RunResult] = []
    problems: list[str] = []
    print(
        f"{'LEGACY TIMEOUTS (30 s heartbeats, 10 s sticky): ' if args.legacy_timeouts else ''}"
        f"{args.sessions} sessions x {args.turns} tool steps of {args.step_seconds} s, two workers; "
        f"chaos: one worker SIGKILLed every {args.kill_min}-{args.kill_max} s and replaced",
        flush=True,
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                free.append(await one_run(args, address, False, Path(tmp), seed=r))
                chaos.append(await one_run(args, address, True, Path(tmp), seed=r))
                f, k = free[-1], chaos[-1]
                diffs = compare(f, k)
                problems += f.failed + k.failed + diffs
                print(
                    f"  round {r + 1}: fault-free {f.wall_s:6.1f} s   chaos {k.wall_s:6.1f} s  "
                    f"({k.kills} kills, {k.retried_activities} activity retries; fault-free {f.retried_activities})"
                    f"   ratio {k.wall_s / f.wall_s:.2f}x   transcripts differing: {len(diffs)}/{len(f.transcripts)}",
                    flush=True,
                )
                if args.gaps:
                    extra = {key: secs - f.gaps.get(key, 0.0) for key, secs in k.gaps.items()}
                    for key, secs in sorted(extra.items(), key=lambda kv: -kv[1])[:6]:
                        print(f"      +{secs / args.sessions:5.2f} s/session more than fault-free between {key}")
    finally:
        await env.shutdown()
    ratios = [k.wall_s / f.wall_s for f, k in zip(free, chaos, strict=True)]
    mf = statistics.median(f.wall_s for f in free)
    mk = statistics.median(k.wall_s for k in chaos)
    print(
        f"\nmedian wall: fault-free {mf:.1f} s, chaos {mk:.1f} s -> ratio {mk / mf:.2f}x "
        f"(per round {' '.join(f'{x:.2f}' for x in ratios)}; spread {min(ratios):.2f}-{max(ratios):.2f}; target <= 1.5x)"
    )
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems[:20]))
        return 1
    print("every session completed; every chaos transcript equals the fault-free one")
    return 0


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
        "--legacy-timeouts", action="store_true", help="run the workers with the timeouts from before issue 18"
    )
    parser.add_argument("--gaps", action="store_true", help="print where the chaos runs' sessions waited")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take before it fails")
    args = parser.parse_args()
    if args.worker:
        asyncio.run(worker_main(args.address, args.task_queue, args.db, args.legacy_timeouts))
        return
    if args.rounds < 1 or args.sessions < 1 or args.turns < 1 or not 0 < args.kill_min <= args.kill_max:
        parser.error("--rounds, --sessions and --turns must be positive, and 0 < --kill-min <= --kill-max")
    sys.exit(asyncio.run(driver(args)))


if __name__ == "__main__":
    # The worker processes die by SIGKILL or SIGTERM; only the driver needs the clean exit helper.
    if "--worker" in sys.argv:
        main()
    else:
        from agent_tools.process_exit import run_and_exit

        run_and_exit(main)
