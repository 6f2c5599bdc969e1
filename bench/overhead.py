"""Engine overhead against a bare Temporal agent loop, side by side in one run.

    python bench/overhead.py                 # 10 and 20 turns; one session at a time, and 50 concurrent
    python bench/overhead.py --quick         # 10 turns, 1 and 10 concurrent
    python bench/overhead.py --rounds 5      # more alternating rounds per configuration (default 3)
    python bench/overhead.py --config 10x50  # only this configuration (turns x concurrent sessions)

A "turn" here is one model step that calls a tool (plus the final answer step). Each mode's worker runs
in its own process on a fresh task queue; worker CPU comes from /proc (utime+stime), RSS is the worker's
peak (VmHWM) after the measured sessions and its RSS after one warm-up session; start-up is the time
from spawning the worker process to the answer of a one-step session that was already waiting on its
queue, with a new store (the engine's first start creates its schema), and the worker's CPU until then
(steadier than the wall clock on a loaded machine); restart is the same with a second
worker process once the first has stopped, which finds its store (a deployed worker's usual start; the
bare loop has no store, so its two are alike). Each configuration runs engine, bare, engine, bare... (``--rounds`` of each, a fresh worker
every time) and prints the median of every figure, the engine/bare ratio of the medians, and each
round's own ratio: on a shared machine one pair of runs can differ by a fifth either way, and the
per-round ratios show how far.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._processes import cpu_seconds  # noqa: E402 - the standard library only

SEQUENTIAL_RUNS = 10


def proc_peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def write_script(path: Path, turns: int) -> str:
    steps = [{"say": "", "tool_calls": [{"name": "lookup", "arguments": {"topic": f"t{i}"}}]} for i in range(turns)]
    steps.append({"say": "done"})
    path.write_text(json.dumps({"conversations": [{"turns": steps}]}))
    return str(path)


# ---- worker process -----------------------------------------------------------------------------------


def bare_runner() -> Any:
    """The bare loop's sandbox: its shared models passed through (bench/bare_messages.py), as a careful
    user would."""
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("pydantic", "bench.bare_messages")
    )


def compile_bytecode() -> None:
    """Bytecode for our package and the benches, as a deployed app has (pip compiles what it installs): a
    checkout run with PYTHONDONTWRITEBYTECODE would otherwise compile every module of ours at each worker
    start, and the bare loop's module at each sandboxed run, while the libraries load from bytecode."""
    for folder in ("agent_tools", "bench"):
        compileall.compile_dir(str(ROOT / folder), quiet=2)


def engine_plugin(address: str, task_queue: str, db: str) -> Any:
    """The engine's plugin with the benchmark's one tool, ``lookup``."""
    from agent_tools._plugin import AgentToolsPlugin
    from agent_tools._settings import Settings
    from agent_tools._user_tools import make_user_tool
    from bench.bare_loop import lookup

    settings = Settings(temporal_address=address, task_queue=task_queue, database_url=db, agents_file=None)
    return AgentToolsPlugin(settings, tools=[make_user_tool(lookup)])


def bare_worker(client: Any, task_queue: str, **kwargs: Any) -> Any:
    """A worker for the bare loop, its two activities and its sandbox."""
    from temporalio.worker import Worker

    from bench.bare_loop import BareAgentLoop, bare_llm, bare_lookup

    return Worker(
        client, task_queue=task_queue, workflows=[BareAgentLoop], activities=[bare_llm, bare_lookup],
        workflow_runner=bare_runner(), **kwargs,
    )  # fmt: skip


async def worker_main(mode: str, address: str, task_queue: str, db: str) -> None:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    if mode == "engine":
        from agent_tools._worker import build_worker

        plugin = engine_plugin(address, task_queue, db)
        client = await Client.connect(address, plugins=[plugin])
        worker = build_worker(client, plugin)  # the production worker's options
    elif mode == "peer":
        # Pydantic AI's Temporal integration as its docs set it up (bench/peers.py; the ``bench`` extra).
        from pydantic_ai.durable_exec.temporal import AgentPlugin, PydanticAIPlugin

        from bench.peer_pydantic_ai import PeerAgent, agent

        client = await Client.connect(address, plugins=[PydanticAIPlugin()])
        worker = Worker(
            client, task_queue=task_queue, workflows=[PeerAgent], plugins=[AgentPlugin(agent)],
            max_concurrent_activities=200,
        )  # fmt: skip
    else:
        client = await Client.connect(address, data_converter=pydantic_data_converter)
        worker = bare_worker(client, task_queue, max_concurrent_activities=200)
    print("ready", flush=True)
    await worker.run()


# ---- driver --------------------------------------------------------------------------------------------


async def run_config(address: str, mode: str, turns: int, concurrency: int, workdir: Path) -> dict[str, float]:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from agent_tools._session import SessionInput, SessionRequest
    from bench.bare_loop import BareInput

    task_queue = f"bench-{mode}-{uuid.uuid4().hex[:8]}"
    db = f"sqlite+aiosqlite:///{workdir}/{task_queue}.sqlite"
    script = write_script(workdir / f"script-{turns}.json", turns)
    first = write_script(workdir / "script-0.json", 0)
    client = await Client.connect(address, data_converter=pydantic_data_converter)

    async def start(i: int, script: str, steps: int) -> Any:
        wid = f"{task_queue}-{i}"
        if mode == "engine":
            req = SessionRequest(prompt="research", model=f"scripted:{script}", tools=["lookup"], max_steps=steps)
            inp: Any = SessionInput(request=req)
            return await client.start_workflow("AgentSession", inp, id=wid, task_queue=task_queue)
        if mode == "peer":
            from bench.peer_pydantic_ai import PeerInput

            peer = PeerInput(prompt="research", steps=steps - 1)  # its model calls lookup steps - 1 times
            return await client.start_workflow("PeerAgent", peer, id=wid, task_queue=task_queue)
        inp = BareInput(prompt="research", script=script, max_steps=steps)
        return await client.start_workflow("BareAgentLoop", inp, id=wid, task_queue=task_queue)

    async def one(i: int) -> tuple[float, str]:
        t0 = time.perf_counter()
        handle = await start(i, script, turns + 1)
        await handle.result()
        return time.perf_counter() - t0, handle.id

    async def spawn_worker(i: int) -> tuple[subprocess.Popen[bytes], float, float]:
        """Start-up: a one-step session waits on the queue, then the worker process starts; the time until
        that session's answer covers the interpreter, the imports, the worker's set-up (store, sandbox
        probe) and its first workflow run, all a fresh worker pays before it serves."""
        waiting = await start(i, first, 1)
        spawned = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", mode, "--address", address, "--task-queue", task_queue, "--db", db],
            stdout=subprocess.DEVNULL, cwd=ROOT,
        )  # fmt: skip
        await waiting.result()
        # Its CPU too: on a loaded machine the wall clock mostly measures the wait for a core.
        return proc, time.perf_counter() - spawned, cpu_seconds(proc.pid)

    proc, startup, startup_cpu = await spawn_worker(-2)
    # Warm up once so that imports and connection set-up are not billed to the measured sessions.
    await one(-1)
    rss_warm = proc_rss_mb(proc.pid)
    cpu0 = cpu_seconds(proc.pid)
    t0 = time.perf_counter()
    if concurrency == 1:
        # One at a time, several times over: /proc counts CPU in 10 ms ticks, too coarse for one session.
        results = [await one(i) for i in range(SEQUENTIAL_RUNS)]
    else:
        results = list(await asyncio.gather(*(one(i) for i in range(concurrency))))
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(proc.pid) - cpu0
    rss = proc_peak_rss_mb(proc.pid)
    sessions = len(results)
    histories = [await client.get_workflow_handle(wid).fetch_history() for _, wid in results[:5]]
    hist = [sum(e.ByteSize() for e in h.events) for h in histories]
    # The work was the same: every loop ran ``turns`` tool calls and one more model step per session.
    for h in histories:
        scheduled = [
            e.activity_task_scheduled_event_attributes.activity_type.name
            for e in h.events
            if e.HasField("activity_task_scheduled_event_attributes")
        ]
        assert len(scheduled) == 2 * turns + 1, (mode, scheduled)
    proc.terminate()
    proc.wait(timeout=20)
    # A restart: the same measure with a worker that finds its store (a deployed worker's usual start; the
    # first start above also created the store's schema, which a store needs once).
    proc, restart, _ = await spawn_worker(-3)
    proc.terminate()
    proc.wait(timeout=20)
    return {
        "latency_s": statistics.mean(r[0] for r in results),
        "throughput": sessions / wall,
        "cpu_per_session_ms": 1000 * cpu / sessions,
        "startup_s": startup,
        "startup_cpu_s": startup_cpu,
        "restart_s": restart,
        "rss_warm_mb": rss_warm,
        "rss_mb": rss,
        "history_kb": statistics.mean(hist) / 1024,
    }


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def pair_ratios(engine_runs: list[dict[str, float]], bare_runs: list[dict[str, float]]) -> dict[str, list[float]]:
    """Each round's engine/bare ratio: the pair ran back to back, so their spread shows the machine's noise."""
    return {
        key: [e[key] / b[key] for e, b in zip(engine_runs, bare_runs, strict=True) if b[key]] for key in engine_runs[0]
    }


async def driver(configs: list[tuple[int, int]], rounds: int) -> None:
    from agent_tools._devserver import start_dev_server

    compile_bytecode()
    env = await start_dev_server(ui=False, log_level="error")
    address = env.client.service_client.config.target_host
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for turns, conc in configs:
                engine_runs, bare_runs = [], []
                for _ in range(rounds):
                    engine_runs.append(await run_config(address, "engine", turns, conc, Path(tmp)))
                    bare_runs.append(await run_config(address, "bare", turns, conc, Path(tmp)))
                engine, bare = medians(engine_runs), medians(bare_runs)
                rows.append((turns, conc, engine, bare))
                print_row(turns, conc, engine, bare, pair_ratios(engine_runs, bare_runs), rounds)
    finally:
        await env.shutdown()
    print()
    by_turns: dict[int, dict[str, float]] = {}
    for turns, conc, engine, bare in rows:
        if conc == configs[0][1]:
            by_turns[turns] = {"engine": engine["history_kb"], "bare": bare["history_kb"]}
    if len(by_turns) >= 2:
        (t1, a), (t2, b) = sorted(by_turns.items())[:2]
        print(
            f"history growth {t1}->{t2} turns: engine x{b['engine'] / a['engine']:.2f} "
            f"(linear would be x{(t2 + 1) / (t1 + 1):.2f}), bare x{b['bare'] / a['bare']:.2f}"
        )


def print_row(
    turns: int,
    conc: int,
    engine: dict[str, float],
    bare: dict[str, float],
    ratios: dict[str, list[float]],
    rounds: int,
) -> None:
    label = f"1 session at a time ({SEQUENTIAL_RUNS} in a row)" if conc == 1 else f"{conc} concurrent sessions"
    print(f"\n{turns} turns, {label}; medians of {rounds} alternating rounds")
    print(f"  {'metric':<22}{'engine':>12}{'bare loop':>12}{'ratio':>9}   {'per-round ratios':<}")
    for key, label in [
        ("latency_s", "latency per session s"),
        ("throughput", "throughput sessions/s"),
        ("cpu_per_session_ms", "worker CPU/session ms"),
        ("startup_s", "start-up to 1st answer s"),
        ("startup_cpu_s", "start-up CPU s"),
        ("restart_s", "restart to 1st answer s"),
        ("rss_warm_mb", "RSS after warm-up MB"),
        ("rss_mb", "worker peak RSS MB"),
        ("history_kb", "history KB/session"),
    ]:
        ratio = engine[key] / bare[key] if bare[key] else float("nan")
        spread = " ".join(f"{r:.2f}" for r in ratios[key])
        print(f"  {label:<22}{engine[key]:>12.2f}{bare[key]:>12.2f}{ratio:>8.2f}x   {spread}")
    sys.stdout.flush()


def parse_config(parser: argparse.ArgumentParser, text: str) -> tuple[int, int]:
    turns, _, sessions = text.partition("x")
    if not (turns.isdigit() and sessions.isdigit() and int(turns) > 0 and int(sessions) > 0):
        parser.error(f"--config {text!r}: expected TURNSxSESSIONS with positive numbers, e.g. 10x50")
    return int(turns), int(sessions)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=["engine", "bare", "peer"])
    parser.add_argument("--address")
    parser.add_argument("--task-queue")
    parser.add_argument("--db")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="alternating engine/bare runs per configuration")
    parser.add_argument("--config", action="append", help="TURNSxSESSIONS, e.g. 10x50 (repeatable)")
    args = parser.parse_args()
    if args.worker:
        asyncio.run(worker_main(args.worker, args.address, args.task_queue, args.db))
        return
    if args.config:
        configs = [parse_config(parser, c) for c in args.config]
    else:
        configs = [(10, 1), (10, 10)] if args.quick else [(10, 1), (20, 1), (10, 50), (20, 50)]
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    asyncio.run(driver(configs, args.rounds))


def worker_and_exit() -> None:
    """A worker process's life: it runs until the driver terminates it. The bare worker must not import
    our package, so it leaves without ``agent_tools.run_and_exit``, through ``os._exit`` likewise."""
    status = 0
    try:
        main()
    except BaseException:
        import traceback

        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker_and_exit()
    from agent_tools._process_exit import run_and_exit

    run_and_exit(main)
