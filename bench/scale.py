"""Many waiting sessions on two workers and PostgreSQL; or one long-lived session of many turns.

    python bench/scale.py --sessions 500                  # then 2,000, then the default 10,000
    python bench/scale.py --sessions 10000 --cache 1000 --rate 10 --start-rate 20
    python bench/scale.py --long --turns 2000             # one chat of 2,000 turns with a watcher attached

Wide (the default): a temporal dev server (the real binary, with the engine's dynamic config), a database
``bench_scale`` of its own on the local PostgreSQL (created fresh, dropped at the end), and two worker
processes built with the production settings and ``max_cached_workflows=--cache``. N sessions start (at
``--start-rate`` a second, at most ``--start-ahead`` ahead of those waiting); each runs one scripted model
step that calls askUser and then waits. Once all N wait, the bench answers them
at ``--rate`` a second, alternately by update and by signal (as ``SessionHandle.answer_questions`` does);
halfway through it SIGKILLs one worker and starts a replacement. Each answered session runs its second
model step and completes. The bench prints:

- answer sent -> the second model step's activity start (from each history), p50 / p99 / max, for the
  answers by update and by signal, before and after the kill;
- every worker's RSS sampled from /proc over the run (by phase and by sessions started: flat once the
  cache is full);
- the CPU seconds of the temporal dev server and of PostgreSQL's backends for ``bench_scale``, by phase;
- model step attempts and completions (counted in the workers, by session and step): none run twice;
- sessions not completed with the answer, if any (the bench exits non-zero).

``--long``: one keep-alive session, ``--turns`` turns (a message from the client, one scripted model step),
``continue_as_new_after_turns=--turns-per-run``, with ``SessionHandle.progress()`` following it all along;
the bench prints ms per turn in buckets of 100 turns, the runs and their history lengths.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._processes import cpu_seconds  # noqa: E402
from bench.askuser_memory import QUESTION  # noqa: E402 - after the path
from bench.askuser_memory import SCRIPT as ASK_SCRIPT  # noqa: E402
from bench.chaos import stop_processes  # noqa: E402

# BENCH_SCALE_DB names another database, for two runs at once (the name goes into SQL: letters and _).
DB_NAME = os.environ.get("BENCH_SCALE_DB", "bench_scale")
if not DB_NAME.replace("_", "").isalnum() or not DB_NAME.isascii():
    raise SystemExit(f"BENCH_SCALE_DB: letters, digits and _ only, got {DB_NAME!r}")
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
CHAT_SCRIPT = {"conversations": [{"repeat_last": True, "turns": [{"say": "noted: {{last_user}}"}]}]}
LLM_STEP = "agent_tools.llm_step"


# ---- /proc ----------------------------------------------------------------------------------------------


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def find_processes(match: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if match in cmd:
            pids.append(int(entry.name))
    return pids


@dataclass
class Sampler:
    """Every ``interval`` s: each live worker's RSS, and the CPU seconds of the dev server and of the
    PostgreSQL backends serving our database and of the workers (the last reading of a process stays
    counted after it exits)."""

    server_pid: int
    worker_pids: list[int]
    interval: float = 1.0
    phase: str = "start"
    started: int = 0
    samples: list[dict[str, Any]] = field(default_factory=list)
    pg_cpu: dict[int, float] = field(default_factory=dict)
    worker_cpu: dict[int, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.wait(self.interval):
            # A backend's title: "postgres: 15/main: postgres bench_scale 127.0.0.1(port) idle".
            for pid in find_processes(f": postgres {DB_NAME} "):
                self.pg_cpu[pid] = max(self.pg_cpu.get(pid, 0.0), cpu_seconds(pid, children=True))
            for pid in self.worker_pids:
                self.worker_cpu[pid] = max(self.worker_cpu.get(pid, 0.0), cpu_seconds(pid, children=True))
            self.samples.append(
                {
                    "t": time.monotonic() - t0,
                    "phase": self.phase,
                    "started": self.started,
                    "rss": [rss_mib(p) for p in self.worker_pids],
                    "server_cpu": cpu_seconds(self.server_pid, children=True),
                    "pg_cpu": sum(self.pg_cpu.values()),
                    "worker_cpu": sum(self.worker_cpu.values()),
                    "load": os.getloadavg()[0],
                }
            )


# ---- workers ---------------------------------------------------------------------------------------------


def count_model_calls(log_dir: Path) -> None:
    """In a worker: append ``start`` and ``done`` lines (session, step) to a file of this process for every
    scripted model call, so that the driver can count the calls that ran twice."""
    from temporalio import activity

    from agent_tools.activities._providers.scripted import ScriptedProvider

    out = (log_dir / f"calls-{os.getpid()}.log").open("a", buffering=1)
    complete = ScriptedProvider.complete

    async def counted(self: ScriptedProvider, request: Any, on_text: Any = None) -> Any:
        key = f"{activity.info().workflow_id} {sum(1 for m in request.messages if m.role == 'assistant')}"
        out.write(f"start {key}\n")
        response = await complete(self, request, on_text)
        out.write(f"done {key}\n")
        return response

    ScriptedProvider.complete = counted  # type: ignore[method-assign]


async def worker_main(address: str, task_queue: str, db: str, cache: int, log_dir: Path) -> None:
    from temporalio.client import Client

    from agent_tools._plugin import AgentToolsPlugin
    from agent_tools._settings import Settings
    from agent_tools._worker import build_worker

    count_model_calls(log_dir)
    settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, agents_file=None,
                        openai_api_key=None, anthropic_api_key=None)  # fmt: skip
    plugin = AgentToolsPlugin(settings)
    client = await Client.connect(address, plugins=[plugin])
    worker = build_worker(client, plugin, max_cached_workflows=cache)
    print("ready", flush=True)
    await worker.run()


@dataclass
class Workers:
    address: str
    task_queue: str
    db: str
    cache: int
    log_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def spawn(self, slot: int) -> subprocess.Popen[bytes]:
        log = (self.log_dir / f"worker-{slot}-{len(self.procs)}.log").open("wb")
        args = [sys.executable, __file__, "--worker", self.address, self.task_queue, self.db, str(self.cache)]
        proc = subprocess.Popen([*args, str(self.log_dir)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        return proc

    def kill_and_replace(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.procs[i] = self.spawn(i)

    def stop(self) -> None:
        stop_processes(self.procs)


# ---- database and server ---------------------------------------------------------------------------------


async def fresh_database() -> str:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {DB_NAME}")
    finally:
        await conn.close()
    return f"postgresql+asyncpg://postgres@127.0.0.1:5432/{DB_NAME}"


async def drop_database() -> None:
    import asyncpg

    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
    finally:
        await conn.close()


def server_pid(port: str) -> int:
    """The dev server this process started, found by its port on the command line."""
    mine = [p for p in find_processes("server start-dev") if f"--port {port}" in _cmdline(p)]
    if not mine:
        raise RuntimeError(f"no temporal dev server on port {port}")
    return mine[0]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def spread(values: list[float]) -> str:
    return f"p50 {percentile(values, 50) * 1000:.0f} ms, p99 {percentile(values, 99) * 1000:.0f} ms, " \
        f"max {percentile(values, 100) * 1000:.0f} ms (n={len(values)})"  # fmt: skip


# ---- wide ------------------------------------------------------------------------------------------------


async def gather_limited(n: int, limit: int, make: Any) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def one(i: int) -> Any:
        async with sem:
            return await make(i)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def start_one(client: Any, session_id: str, model: str) -> Any:
    """Starts a session; a start that timed out on the loaded server is tried again (one already started
    is the session)."""
    from temporalio.service import RPCError

    from agent_tools._errors import SessionError

    for attempt in range(10):
        try:
            return await client.start_session(f"bench {session_id}", session_id=session_id, model=model)
        except SessionError:  # exists already: an earlier attempt started it
            return client.session(session_id)
        except RPCError:
            if attempt == 9:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")


async def start_paced(
    args: argparse.Namespace, client: Any, task_queue: str, model: str, sampler: Sampler
) -> list[Any]:
    """Starts the sessions at ``--start-rate`` a second, never more than ``--start-ahead`` ahead of those
    waiting: unpaced, thousands of first workflow tasks queue up on the loaded workers, time out and run
    again, and the start never catches up."""
    query = f"WorkflowType = 'AgentSession' AND TaskQueue = '{task_queue}' AND SessionState = 'waiting_for_user'"
    tasks: list[asyncio.Task[Any]] = []
    waiting = 0
    t0 = time.monotonic()
    for i in range(args.sessions):
        await asyncio.sleep(max(0.0, t0 + i / args.start_rate - time.monotonic()))
        while i - waiting > args.start_ahead:
            waiting = (await client.temporal.count_workflows(query)).count
            sampler.started = waiting
            if i - waiting > args.start_ahead:
                await asyncio.sleep(0.5)
        tasks.append(asyncio.create_task(start_one(client, f"{task_queue}-{i}", model)))
    return list(await asyncio.gather(*tasks))


async def wait_waiting(client: Any, task_queue: str, want: int, timeout: float, sampler: Sampler) -> None:
    query = f"WorkflowType = 'AgentSession' AND TaskQueue = '{task_queue}' AND SessionState = 'waiting_for_user'"
    t0 = time.monotonic()
    while (count := (await client.temporal.count_workflows(query)).count) < want:
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{count} of {want} sessions waiting after {timeout} s")
        sampler.started = count
        if int(time.monotonic() - t0) % 30 == 0:
            print(f"    {count} waiting", flush=True)
        await asyncio.sleep(1.0)
    sampler.started = want


async def answer_all(
    args: argparse.Namespace, handles: list[Any], workers: Workers, sampler: Sampler
) -> tuple[dict[str, float], list[str]]:
    """Answers at ``--rate`` a second, alternately by update and by signal; kills a worker halfway. The
    time each answer was sent (epoch seconds) by session id, and the answers that raised."""
    sent: dict[str, float] = {}
    errors: list[str] = []
    tasks: list[asyncio.Task[None]] = []
    sem = asyncio.Semaphore(args.concurrency)

    async def answer(i: int, h: Any) -> None:
        async with sem:
            sent[h.id] = time.time()
            try:
                await h.answer_questions({QUESTION: "dayjs"}, by_signal=i % 2 == 1)
            except Exception as exc:  # the session must still get it: once more, by signal
                errors.append(f"{h.id}: {type(exc).__name__}: {exc}")
                await h.answer_questions({QUESTION: "dayjs"}, by_signal=True)

    t0 = time.monotonic()
    for i, h in enumerate(handles):
        if i == len(handles) // 2 and args.kill:
            workers.kill_and_replace(0)
            sampler.worker_pids = [p.pid for p in workers.procs]
            print(f"  SIGKILLed worker 0 after {i} answers and started its replacement", flush=True)
        await asyncio.sleep(max(0.0, t0 + i / args.rate - time.monotonic()))
        tasks.append(asyncio.create_task(answer(i, h)))
    await asyncio.gather(*tasks)
    return sent, errors


@dataclass
class HistoryFacts:
    latency: float | None  # answer sent -> the second model step's activity started
    steps_scheduled: int
    retried_starts: int


async def history_facts(h: Any, sent: float | None) -> HistoryFacts:
    events = (await h.workflow.fetch_history()).events
    scheduled: dict[int, int] = {}
    starts: list[Any] = []
    for e in events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            if e.activity_task_scheduled_event_attributes.activity_type.name == LLM_STEP:
                scheduled[e.event_id] = len(scheduled)
        elif e.HasField("activity_task_started_event_attributes"):
            a = e.activity_task_started_event_attributes
            if a.scheduled_event_id in scheduled:
                starts.append((scheduled[a.scheduled_event_id], e.event_time.ToDatetime().timestamp(), a.attempt))
    second = [t for step, t, _ in starts if step == 1]
    latency = second[0] - sent if second and sent is not None else None
    return HistoryFacts(latency, len(scheduled), sum(1 for *_, attempt in starts if attempt > 1))


def model_calls(log_dir: Path) -> tuple[Counter[str], Counter[str]]:
    starts: Counter[str] = Counter()
    done: Counter[str] = Counter()
    for path in log_dir.glob("calls-*.log"):
        for line in path.read_text().splitlines():
            kind, _, key = line.partition(" ")
            (starts if kind == "start" else done)[key] += 1
    return starts, done


def print_samples(sampler: Sampler, n: int, cache: int) -> None:
    samples = sampler.samples
    if not samples:
        return
    print("\nworker RSS (MiB, each worker) and CPU seconds so far, sampled every second:")
    marks = sorted({min(len(samples) - 1, round(k * (len(samples) - 1) / 20)) for k in range(21)})
    for i in marks:
        s = samples[i]
        rss = " ".join(f"{r:6.0f}" for r in s["rss"])
        print(f"  t={s['t']:6.0f} s  {s['phase']:>9}  waiting {s['started']:6d}  RSS {rss}   server cpu "
              f"{s['server_cpu']:7.1f}  postgres cpu {s['pg_cpu']:6.1f}  workers cpu {s['worker_cpu']:7.1f}"
              f"  load {s['load']:.1f}")  # fmt: skip
    # Flat once the cache is full: the RSS of the samples after the cache filled (each worker holds up to
    # ``cache`` sessions, so 2 x cache waiting) up to the end of the wait.
    full = [s for s in samples if s["phase"] == "start" and s["started"] >= min(n, 2 * cache)]
    full += [s for s in samples if s["phase"] == "waiting"]
    if full:
        first, last = full[0], full[-1]
        peak = [max(s["rss"][k] for s in full) for k in range(len(first["rss"]))]
        print(f"  cache full (>= {min(n, 2 * cache)} waiting) at t={first['t']:.0f} s: RSS "
              f"{' '.join(f'{r:.0f}' for r in first['rss'])} MiB; all {n} waiting at t={last['t']:.0f} s: RSS "
              f"{' '.join(f'{r:.0f}' for r in last['rss'])} MiB; max while waiting "
              f"{' '.join(f'{x:.0f}' for x in peak)} MiB")  # fmt: skip
    phases: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        phases.setdefault(s["phase"], []).append(s)
    prev: dict[str, Any] | None = None
    for name, group in phases.items():
        start = prev or group[0]
        end = group[-1]
        secs = max(1e-9, end["t"] - start["t"])
        print(f"  {name:>9}: {secs:6.0f} s, dev server {(end['server_cpu'] - start['server_cpu']) / secs:.2f} "
              f"cores, postgres {(end['pg_cpu'] - start['pg_cpu']) / secs:.2f} cores, workers "
              f"{(end['worker_cpu'] - start['worker_cpu']) / secs:.2f} cores (load {statistics.mean(s['load'] for s in group):.1f})")  # fmt: skip
        prev = end


@dataclass
class Run:
    """A run's dev server, database, scripted model, workers and client."""

    env: Any
    address: str
    db: str
    tmp: Path
    model: str
    task_queue: str
    workers: Workers
    client: Any

    @classmethod
    async def set_up(cls, args: argparse.Namespace, script: dict[str, Any], prefix: str, workers: int) -> Run:
        from agent_tools._client import AgentToolsClient
        from agent_tools._devserver import start_dev_server
        from agent_tools._settings import Settings

        db = await fresh_database()
        env = await start_dev_server(ui=False, log_level="error")
        address = env.client.service_client.config.target_host
        tmp = Path(tempfile.mkdtemp(prefix="bench-scale-"))
        (tmp / "script.json").write_text(json.dumps(script))
        model = f"scripted:{tmp / 'script.json'}"
        task_queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
        procs = Workers(address, task_queue, db, args.cache, tmp)
        procs.procs = [procs.spawn(i) for i in range(workers)]
        settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, model=model,
                            agents_file=None)  # fmt: skip
        return cls(env, address, db, tmp, model, task_queue, procs, AgentToolsClient(env.client, settings))

    async def tear_down(self) -> None:
        self.workers.stop()
        await self.env.shutdown()
        await drop_database()
        shutil.rmtree(self.tmp, ignore_errors=True)


async def wide(args: argparse.Namespace) -> int:
    from agent_tools._session import SessionStatus

    run = await Run.set_up(args, ASK_SCRIPT, "scale", 2)
    address, task_queue, model, workers, client = run.address, run.task_queue, run.model, run.workers, run.client
    sampler = Sampler(server_pid(address.rsplit(":", 1)[1]), [p.pid for p in workers.procs])
    thread = threading.Thread(target=sampler.run, daemon=True)
    thread.start()
    print(f"{args.sessions} sessions, two workers with max_cached_workflows={args.cache}, store on PostgreSQL; "
          f"answers at {args.rate}/s (half by update, half by signal){', one worker SIGKILLed halfway' if args.kill else ''}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    problems: list[str] = []
    try:
        t0 = time.monotonic()
        handles = await start_paced(args, client, task_queue, model, sampler)
        print(f"  started {args.sessions} in {time.monotonic() - t0:.0f} s", flush=True)
        await wait_waiting(client, task_queue, args.sessions, args.timeout, sampler)
        print(f"  all {args.sessions} waiting on askUser after {time.monotonic() - t0:.0f} s", flush=True)
        sampler.phase = "waiting"
        await asyncio.sleep(5)
        sampler.phase = "answering"
        t1 = time.monotonic()
        sent, errors = await answer_all(args, handles, workers, sampler)
        print(
            f"  answered all in {time.monotonic() - t1:.0f} s ({len(errors)} answers raised, sent again by signal)",
            flush=True,
        )
        problems += errors[:5]
        results = await gather_limited(len(handles), 200, lambda i: handles[i].result())
        sampler.phase = "done"
        print(f"  all ended {time.monotonic() - t1:.0f} s after the first answer", flush=True)
        for h, r in zip(handles, results, strict=True):
            if r.status != SessionStatus.completed or "dayjs" not in (r.final_message or ""):
                problems.append(f"{h.id}: {r.status} {r.final_message!r}")
        facts = await gather_limited(len(handles), 50, lambda i: history_facts(handles[i], sent.get(handles[i].id)))
        calls = model_calls(run.tmp)
    finally:
        sampler.stop.set()
        thread.join()
        await run.tear_down()
    half = len(handles) // 2
    for label, idx in (("by update", range(0, len(handles), 2)), ("by signal", range(1, len(handles), 2))):
        for part, sel in (
            ("before the kill", [i for i in idx if i < half]),
            ("after it", [i for i in idx if i >= half]),
        ):
            lat = [facts[i].latency for i in sel if facts[i].latency is not None]
            print(f"  answer {label:>9} -> next model step started, {part:>15}: {spread(lat)}")  # type: ignore[arg-type]
    every = [f.latency for f in facts if f.latency is not None]
    print(f"  answer -> next model step started, all: {spread(every)}   (target p99 < 1000 ms)")  # type: ignore[arg-type]
    starts, done = calls
    twice_started = sum(1 for c in starts.values() if c > 1)
    twice_done = sum(1 for c in done.values() if c > 1)
    steps = Counter(f.steps_scheduled for f in facts)
    print(f"  model steps: {sum(starts.values())} calls started, {sum(done.values())} completed, for "
          f"{len(done)} (session, step) pairs; started twice: {twice_started}, completed twice: {twice_done}; "
          f"llm_step activities per session {dict(steps)}; retried attempts {sum(f.retried_starts for f in facts)}")  # fmt: skip
    if twice_done or set(steps) != {2}:
        problems.append(f"model steps run twice: {twice_done}; steps per session {dict(steps)}")
    print_samples(sampler, args.sessions, args.cache)
    if problems:
        print("PROBLEMS:\n  " + "\n  ".join(problems[:20]))
        return 1
    print(f"every one of {args.sessions} sessions completed with its answer")
    return 0


# ---- long ------------------------------------------------------------------------------------------------


async def long(args: argparse.Namespace) -> int:
    run = await Run.set_up(args, CHAT_SCRIPT, "long", 1)
    env, client = run.env, run.client
    per_turn: list[float] = []
    finished = asyncio.Event()
    seen = {"turns": 0, "events": 0}
    try:
        handle = await client.start_session(
            None, session_id=f"{run.task_queue}-chat", model=run.model, keep_alive=True,
            options={"continue_as_new_after_turns": args.turns_per_run},
        )  # fmt: skip

        async def watch() -> None:
            async for event in handle.progress():
                seen["events"] += 1
                if event.kind == "turn_finished":
                    seen["turns"] += 1
                    finished.set()

        watcher = asyncio.create_task(watch())
        print(f"one session, {args.turns} turns, continue-as-new every {args.turns_per_run} turns, a watcher "
              f"following progress(); load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        for i in range(args.turns):
            t0 = time.perf_counter()
            finished.clear()
            await handle.send(f"message {i}")
            while seen["turns"] <= i:
                await asyncio.wait_for(finished.wait(), timeout=60)
                finished.clear()
            per_turn.append(time.perf_counter() - t0)
            if (i + 1) % 100 == 0:
                b = per_turn[-100:]
                print(f"  turns {i - 98:5d}-{i + 1:5d}: median {statistics.median(b) * 1000:6.1f} ms, p90 "
                      f"{percentile(b, 90) * 1000:6.1f} ms, max {max(b) * 1000:6.1f} ms   load {os.getloadavg()[0]:.1f}",
                      flush=True)  # fmt: skip
        runs = [w async for w in env.client.list_workflows(f"WorkflowId = '{handle.id}'")]
        lengths = sorted(w.history_length for w in runs if w.history_length)
        print(f"  {len(runs)} runs; history events per run: min {lengths[0] if lengths else 0}, max "
              f"{lengths[-1] if lengths else 0}; the watcher saw {seen['events']} events, {seen['turns']} turns")  # fmt: skip
        await handle.stop()
        await asyncio.wait_for(watcher, timeout=60)
    finally:
        await run.tear_down()
    buckets = [statistics.median(per_turn[k : k + 100]) for k in range(0, len(per_turn), 100)]
    if buckets:
        print(f"  per-turn median by 100-turn bucket: first {buckets[0] * 1000:.1f} ms, last {buckets[-1] * 1000:.1f} ms,"
              f" last/first {buckets[-1] / buckets[0]:.2f}x (spread {min(buckets) * 1000:.1f}-{max(buckets) * 1000:.1f} ms)")  # fmt: skip
    return 0


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        address, task_queue, db, cache, log_dir = sys.argv[2:7]
        asyncio.run(worker_main(address, task_queue, db, int(cache), Path(log_dir)))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--cache", type=int, default=1000, help="each worker's max_cached_workflows")
    parser.add_argument("--rate", type=float, default=10.0, help="answers sent per second")
    parser.add_argument("--start-rate", type=float, default=20.0, help="sessions started per second at most")
    parser.add_argument("--start-ahead", type=int, default=200, help="sessions started ahead of those waiting")
    parser.add_argument("--concurrency", type=int, default=100, help="answers in flight at most")
    parser.add_argument("--no-kill", dest="kill", action="store_false", help="no worker killed halfway")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds the sessions may take to wait")
    parser.add_argument("--long", action="store_true", help="instead: one session of --turns turns")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--turns-per-run", type=int, default=100, help="with --long: continue-as-new after")
    args = parser.parse_args()
    if args.sessions < 2 or args.cache < 1 or min(args.rate, args.start_rate) <= 0 or args.turns < 1:
        parser.error("--sessions >= 2, --cache >= 1, --rate and --start-rate > 0, --turns >= 1")
    sys.exit(asyncio.run(long(args) if args.long else wide(args)))


if __name__ == "__main__":
    if "--worker" in sys.argv[1:2]:
        main()
    else:
        from agent_tools._process_exit import run_and_exit

        run_and_exit(main)
