"""Bench: N sessions waiting on askUser at once, with the worker's resident memory measured.

    python bench/askuser_memory.py                       # 1,000 sessions, default workflow cache
    python bench/askuser_memory.py --sessions 1000 --cache 100
    python bench/askuser_memory.py --sessions 300 --before /path/to/older/checkout   # before / after / bare
    python bench/askuser_memory.py --sessions 150 --profile   # where the sessions' Python memory went
    python bench/askuser_memory.py --sessions 500 --cache 10 --batches 5   # RSS as the waiting count grows
    python bench/askuser_memory.py --sessions 300 --workflow-threads 4     # a smaller workflow task executor
    python bench/askuser_memory.py --sessions 300 --batches 2 --components  # the worker's memory by part
    python bench/askuser_memory.py --sessions 300 --components --trace-python   # ... with the Python heap

Starts an embedded Temporal dev server and a worker in a subprocess (so that its RSS is the worker's
alone), warms the worker up with one session, starts N sessions whose scripted model calls askUser, waits
until all N are ``waiting_for_user``, reads the worker's RSS, answers them all by update, waits for every
session to complete, and reads the RSS again.

Beside it, on the same server and the same worker settings (cache size, workflow task slots), N bare
workflows that wait on a signal (the SDK's defaults, sandbox included): their KiB each is the floor a
waiting Temporal workflow costs. Engine and bare alternate for ``--rounds`` rounds (default 3); the bench
prints each round's KiB per waiting workflow for both, their ratio, and the medians. With ``--before`` (a
checkout of older code, e.g. a ``git worktree``), each round runs that code's worker first, then this
one's, then the bare one, and prints the three. It also prints the figure after ``malloc_trim``: a full
collection, then glibc returns its free pages, so what is left is what the waiting sessions hold rather than
the heap the work before the wait freed but kept mapped. It is a measurement, not a test (it asserts only
that every session got its answer).

``--batches K`` starts the sessions (and the bare workflows) in K batches and reads the RSS once each batch
waits: the slope past the first batch is what one more waiting session costs, without what a worker pays
once under load (its threads, pools, and the heap the first burst of work leaves mapped). Every session's
history is then read for activity attempts past the first (a model step run twice).

``--components`` also reads, in both workers, the memory by part (``memory_parts``: glibc malloc's chunks
in use and free, pymalloc's arenas, the resident rest) at the baseline and with all waiting, before and after
the trim, and prints each part's growth per waiting workflow, engine / bare, with the size of one waiting
workflow's history (events, bytes, payload bytes). ``--trace-python`` adds tracemalloc from the baseline on
in both workers: the Python heap's total (its own tables inflate the RSS of that run).

``--profile`` runs the engine once with ``tracemalloc`` in the worker and prints the Python allocations the
waiting sessions hold, by line, by file and by traceback. tracemalloc sees Python's heap only; for the rest
(the SDK core's Rust state, protobuf arenas, pydantic-core) run a worker under memray with native traces
(its leaked-allocations view); docs/benchmarks.md gives both.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTION = "Which date formatting library should we use?"
SCRIPT = {
    "conversations": [
        {
            "turns": [
                {
                    "say": "Let me ask.",
                    "tool_calls": [
                        {
                            "name": "askUser",
                            "arguments": {
                                "questions": [
                                    {
                                        "question": QUESTION,
                                        "header": "Date Library",
                                        "options": [
                                            {"label": "date-fns", "description": "Lightweight"},
                                            {"label": "dayjs", "description": "Small, Moment-like"},
                                        ],
                                    }
                                ]
                            },
                        }
                    ],
                },
                {"say": "Thanks: {{last_tool}}"},
            ]
        }
    ]
}


def rss_kib(pid: int) -> int:
    """Resident set size of a process in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def batch_sizes(n: int, batches: int) -> list[int]:
    """N split into ``batches`` nearly equal batches, started one after the other."""
    return [n // batches + (1 if i < n % batches else 0) for i in range(batches)]


def marginal(series: list[tuple[int, int]]) -> float | None:
    """KiB each waiting workflow added from the first batch to the last: the slope, without what a worker
    pays once under load (threads, pools, the heap the first burst of work leaves mapped)."""
    if len(series) < 2 or series[-1][0] == series[0][0]:
        return None
    return round((series[-1][1] - series[0][1]) / (series[-1][0] - series[0][0]), 1)


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


# ---- the bare reference ---------------------------------------------------------------------------------


async def run_bare_worker(address: str, task_queue: str, cache: int) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from bench.bare_waiter import BareWaiter

    client = await Client.connect(address)
    worker = Worker(
        client, task_queue=task_queue, workflows=[BareWaiter], max_cached_workflows=cache,
        max_concurrent_workflow_tasks=200, **workflow_threads(),
    )  # fmt: skip
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, collect_and_trim)
    async with worker:
        print("READY", flush=True)
        await stop.wait()


async def drive_bare(
    env: Any, n: int, cache: int, batches: int = 1, components: bool = False
) -> tuple[int, float | None, dict[str, Any]]:
    """RSS with N bare workflows waiting minus RSS after one warm-up (KiB), the KiB each waiting one adds
    past the first batch (None with one batch), and with ``components`` the memory by part per waiting
    workflow and the size of one waiting workflow's history (``parts_per_waiting``, ``history_size``)."""
    from bench.bare_waiter import BareWaiter

    tmp = Path(tempfile.mkdtemp(prefix="askuser-bare-"))
    task_queue = f"bare-{uuid.uuid4().hex[:8]}"
    address = env.client.service_client.config.target_host
    stats_path = tmp / "parts.jsonl"
    proc = await start_worker(
        ("--bare-worker", address, task_queue, str(cache)), tmp / "worker.log",
        env={STATS_ENV: str(stats_path)} if components else {},
    )  # fmt: skip
    client = env.client
    try:
        warm = await client.start_workflow(BareWaiter.run, "warm", id=f"{task_queue}-warm", task_queue=task_queue)
        await warm.signal(BareWaiter.answer_question, "x")
        await warm.result()
        await asyncio.sleep(1.0)
        baseline = rss_kib(proc.pid)
        if components:  # as the engine's run does: the baseline's parts, then a trim
            proc.send_signal(signal.SIGUSR2)
            await asyncio.sleep(1.0)
        sem = asyncio.Semaphore(100)

        async def start(i: int) -> Any:
            async with sem:
                return await client.start_workflow(
                    BareWaiter.run, f"b{i}", id=f"{task_queue}-{i}", task_queue=task_queue
                )

        handles: list[Any] = []
        series: list[tuple[int, int]] = []
        for size in batch_sizes(n, batches):
            batch = await asyncio.gather(*(start(i) for i in range(len(handles), len(handles) + size)))
            # Every one has run its first workflow task (and sits in the cache) once its history has 4 events.
            for h in batch:
                for _ in range(600):
                    if len((await h.fetch_history()).events) >= 4:
                        break
                    await asyncio.sleep(0.1)
            handles += batch
            await asyncio.sleep(2.0)
            series.append((len(handles), rss_kib(proc.pid)))
        waiting = series[-1][1]
        extra: dict[str, Any] = {}
        if components:
            extra = await read_components(proc, stats_path, n, handles[0])

        async def answer(h: Any) -> None:
            async with sem:
                await h.signal(BareWaiter.answer_question, "dayjs")

        await asyncio.gather(*(answer(h) for h in handles))
        results = await asyncio.gather(*(h.result() for h in handles))
        assert all(r.endswith("dayjs") for r in results)
        return waiting - baseline, marginal(series), extra
    finally:
        await stop_worker(proc)
        shutil.rmtree(tmp, ignore_errors=True)


# ---- worker subprocess ---------------------------------------------------------------------------------


async def run_worker(address: str, task_queue: str, database_url: str, model: str, cache: int) -> None:
    from temporalio.client import Client

    from agent_tools._plugin import AgentToolsPlugin
    from agent_tools._settings import Settings
    from agent_tools._worker import build_worker

    settings = Settings(
        temporal_address=address,
        task_queue=task_queue,
        database_url=database_url,
        model=model,
        agents_file=None,
        openai_api_key=None,
        anthropic_api_key=None,
    )
    plugin = AgentToolsPlugin(settings)
    client = await Client.connect(address, plugins=[plugin])
    worker = build_worker(
        client, plugin, max_cached_workflows=cache, max_concurrent_workflow_tasks=200, **workflow_threads()
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if profile := os.environ.get(PROFILE_ENV):
        install_profiler(Path(profile))
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, collect_and_trim)
    async with worker:
        print("READY", flush=True)
        await stop.wait()


PROFILE_ENV = "AGENT_TOOLS_BENCH_PROFILE"
STATS_ENV = "AGENT_TOOLS_BENCH_STATS"
TRACE_ENV = "AGENT_TOOLS_BENCH_TRACE_PYTHON"
THREADS_ENV = "AGENT_TOOLS_BENCH_WORKFLOW_THREADS"


def workflow_threads() -> dict[str, Any]:
    """``--workflow-threads``: the worker's workflow task executor (by default the SDK makes one with a
    thread per workflow task slot, here 200); the same for the engine's worker and the bare one."""
    import concurrent.futures

    threads = int(os.environ.get(THREADS_ENV) or 0)
    return {"workflow_task_executor": concurrent.futures.ThreadPoolExecutor(threads)} if threads else {}


def collect_and_trim() -> None:
    """SIGUSR2: a full collection, then glibc hands its free pages back to the system. RSS after it is what
    the waiting sessions hold; before it, also the heap the work before the wait left freed but mapped.
    With ``--components`` it appends the worker's memory by part (``memory_parts``) before and after to the
    file ``STATS_ENV`` names, and with ``--trace-python`` the first one starts tracemalloc."""
    import gc

    stats = os.environ.get(STATS_ENV)
    if stats:
        write_parts(Path(stats), "before_trim")
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    if stats:
        write_parts(Path(stats), "after_trim")
        if os.environ.get(TRACE_ENV):
            import tracemalloc

            if not tracemalloc.is_tracing():
                tracemalloc.start(1)  # one frame: the least slowdown; only the total is read


def write_parts(path: Path, when: str) -> None:
    with path.open("a") as f:
        f.write(json.dumps({"when": when, **memory_parts()}) + "\n")


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (2.33 on), summed over all its arenas."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()
    ]


def memory_parts() -> dict[str, int]:
    """The worker's memory by part, in bytes: RSS (anonymous, file-backed), glibc malloc's heap (in use, free
    but kept, mmapped chunks: the SDK core's Rust, upb's protobuf arenas, pydantic-core and Python's large
    objects all allocate there), pymalloc's arenas and the blocks in use in them (Python's objects up to 512
    bytes), the anonymous RSS beyond malloc's chunks in use and pymalloc's arenas (free heap still resident,
    thread stacks), and, while tracemalloc runs (pymalloc then reports nothing), the Python allocations made
    since it started and tracemalloc's own memory."""
    import re
    import tracemalloc

    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    parts = {k.lower(): int(status[k].split()[0]) * 1024 for k in ("VmRSS", "RssAnon", "RssFile")}
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    m = libc.mallinfo2()
    parts |= {"malloc_in_use": m.uordblks, "malloc_free": m.fordblks, "malloc_mmapped": m.hblkhd}
    parts["malloc_system"] = m.arena + m.hblkhd
    # pymalloc prints its statistics to the C-level stderr: sent to a file while it does.
    with tempfile.TemporaryFile("w+") as out:
        saved = os.dup(2)
        sys.stderr.flush()
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()

    def figure(label: str) -> int:
        found = re.search(rf"^{re.escape(label)}\s*=\s*([\d,]+)", text, re.M)
        return int(found.group(1).replace(",", "")) if found else 0

    arenas = re.search(r"^(\d+) arenas \* (\d+) bytes/arena", text, re.M)
    if arenas:
        parts["pymalloc_arenas"] = int(arenas.group(1)) * int(arenas.group(2))
        parts["pymalloc_in_use"] = figure("# bytes in allocated blocks")
        heaps = parts["malloc_in_use"] + parts["malloc_mmapped"] + parts["pymalloc_arenas"]
        parts["anon_beyond_heaps"] = parts["rssanon"] - heaps
    if tracemalloc.is_tracing():
        parts["python_traced"] = tracemalloc.get_traced_memory()[0]
        parts["tracemalloc_own"] = tracemalloc.get_tracemalloc_memory()
    return parts


def install_profiler(out: Path) -> None:
    """``--profile``: Python allocations of the waiting sessions, by the line that made them. The first
    SIGUSR1 takes the baseline snapshot, the second writes the growth since then to ``out``. tracemalloc sees
    only Python's heap: what RSS grew by beyond its total is the SDK's Rust core (history, state machines)."""
    import tracemalloc

    snapshots: list[tracemalloc.Snapshot] = []

    def take() -> None:
        if not tracemalloc.is_tracing():
            # Started here, after the warm-up, and with few frames: tracing every allocation slows workflow
            # tasks past their timeout when it runs from the start with deep tracebacks.
            tracemalloc.start(8)
        keep = (tracemalloc.Filter(False, tracemalloc.__file__),)
        snapshots.append(tracemalloc.take_snapshot().filter_traces(keep))
        if len(snapshots) < 2:
            return
        lines = []
        for group in ("lineno", "filename"):
            diff = snapshots[-1].compare_to(snapshots[0], group)
            total = sum(d.size_diff for d in diff)
            lines.append(f"-- by {group}: {total / 1024:.0f} KiB grown in all")
            lines += [f"{d.size_diff / 1024:9.1f} KiB {d.count_diff:8d} blocks  {d.traceback}" for d in diff[:40]]
            ours = [d for d in diff if "agent_tools" in str(d.traceback)][:40]
            lines.append(f"-- ours by {group}: {sum(d.size_diff for d in ours) / 1024:.0f} KiB in the largest 40")
            lines += [f"{d.size_diff / 1024:9.1f} KiB {d.count_diff:8d} blocks  {d.traceback}" for d in ours]
        diff = snapshots[-1].compare_to(snapshots[0], "traceback")
        lines.append("-- the 12 largest by traceback")
        for d in diff[:12]:
            lines.append(f"{d.size_diff / 1024:9.1f} KiB {d.count_diff:8d} blocks")
            lines += [f"      {frame}" for frame in d.traceback.format()]
        out.write_text("\n".join(lines) + "\n")

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, take)


# ---- driver --------------------------------------------------------------------------------------------


async def wait_count(client: Any, query: str, want: int, timeout: float) -> float:
    started = time.monotonic()
    while True:
        count = (await client.temporal.count_workflows(query)).count
        if count >= want:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{count} of {want} after {timeout}s for {query!r}")
        await asyncio.sleep(0.5)


async def drive(
    env: Any, n: int, cache: int, root: Path = ROOT, profile: bool = False, batches: int = 1, components: bool = False
) -> dict[str, Any]:
    from agent_tools._client import AgentToolsClient
    from agent_tools._settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="askuser-bench-"))
    script_path = tmp / "script.json"
    script_path.write_text(json.dumps(SCRIPT))
    model = f"scripted:{script_path}"
    database_url = f"sqlite+aiosqlite:///{tmp}/store.sqlite"
    task_queue = f"bench-{uuid.uuid4().hex[:8]}"
    address = env.client.service_client.config.target_host
    worker_args = ("--worker", address, task_queue, database_url, model, str(cache))
    profile_path = tmp / "profile.txt"
    stats_path = tmp / "parts.jsonl"
    proc = await start_worker(
        worker_args, tmp / "worker-1.log", root,
        {PROFILE_ENV: str(profile_path)} if profile else {STATS_ENV: str(stats_path)} if components else {},
    )  # fmt: skip
    cold = rss_kib(proc.pid)
    failed: BaseException | None = None
    try:
        settings = Settings(temporal_address=address, task_queue=task_queue, database_url=database_url, model=model)
        client = AgentToolsClient(env.client, settings)
        base_query = f"WorkflowType = 'AgentSession' AND TaskQueue = '{task_queue}'"

        # Warm-up: one full session so imports, the store and the sandbox are paid for before the baseline.
        warm = await client.start_session("warm up")
        await wait_count(client, f"{base_query} AND SessionState = 'waiting_for_user'", 1, 60)
        await warm.answer_questions({QUESTION: "date-fns"})
        await warm.result()
        await asyncio.sleep(1.0)
        baseline = rss_kib(proc.pid)
        proc.send_signal(signal.SIGUSR2)
        await asyncio.sleep(1.0)
        baseline_trimmed = rss_kib(proc.pid)
        if profile:
            proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(3.0)

        started = time.monotonic()
        sem = asyncio.Semaphore(100)

        async def start(i: int) -> Any:
            async with sem:
                return await client.start_session(f"bench {i}")

        waiting_query = f"{base_query} AND SessionState = 'waiting_for_user'"
        series: list[tuple[int, int]] = []
        if profile:
            # Traced allocations make a workflow task several times slower: ten at a time, each ten waiting
            # before the next start, keeps them within their timeout.
            handles = []
            for first in range(0, n, 10):
                handles += await asyncio.gather(*(start(i) for i in range(first, min(n, first + 10))))
                await wait_count(client, waiting_query, len(handles), 600)
        else:
            handles = []
            for size in batch_sizes(n, batches):
                handles += await asyncio.gather(*(start(i) for i in range(len(handles), len(handles) + size)))
                await wait_count(client, waiting_query, len(handles), 600)
                await asyncio.sleep(2.0)
                series.append((len(handles), rss_kib(proc.pid)))
        start_seconds = time.monotonic() - started
        await wait_count(client, waiting_query, n, 600)
        all_waiting_seconds = time.monotonic() - started
        await asyncio.sleep(2.0)
        waiting = rss_kib(proc.pid)
        if components:
            parts = await read_components(proc, stats_path, n, handles[0].workflow)
        else:
            proc.send_signal(signal.SIGUSR2)
            await asyncio.sleep(2.0)
        trimmed = rss_kib(proc.pid)
        if profile:
            proc.send_signal(signal.SIGUSR1)
            for _ in range(600):
                if profile_path.exists():
                    break
                await asyncio.sleep(0.5)
            print(profile_path.read_text(), flush=True)
        # A fresh worker while every session waits: the wait itself holds no worker memory.
        await stop_worker(proc)
        proc = await start_worker(worker_args, tmp / "worker-2.log", root)
        await asyncio.sleep(3.0)
        fresh_waiting = rss_kib(proc.pid)

        started = time.monotonic()

        async def answer(h: Any) -> None:
            async with sem:
                await answer_once(h)

        await asyncio.gather(*(answer(h) for h in handles))
        answer_seconds = time.monotonic() - started
        await wait_count(client, f"{base_query} AND ExecutionStatus = 'Completed'", n + 1, 600)
        done_seconds = time.monotonic() - started
        results = await asyncio.gather(*(h.result() for h in handles))
        assert all('"dayjs"' in (r.final_message or "") for r in results), results[0]
        retried, steps = await count_attempts(handles)
        await asyncio.sleep(2.0)
        after = rss_kib(proc.pid)
        return {
            "sessions": n,
            "max_cached_workflows": cache,
            "worker_rss_cold_start": mib(cold),
            "worker_rss_baseline_after_warm_up": mib(baseline),
            "worker_rss_all_waiting": mib(waiting),
            "delta_while_waiting": mib(waiting - baseline),
            "per_waiting_session_kib": round((waiting - baseline) / n, 1),
            "per_waiting_session_kib_after_malloc_trim": round((trimmed - baseline_trimmed) / n, 1),
            "rss_by_waiting_count": " ".join(f"{k}:{mib(v)}" for k, v in series),
            "marginal_kib_per_waiting_session": marginal(series),
            "delta_kib": waiting - baseline,
            "fresh_worker_rss_while_all_wait": mib(fresh_waiting),
            "fresh_worker_rss_after_answering_all": mib(after),
            "activities_run_again_in_all_sessions": retried,
            "model_steps_per_session": round(steps / n, 2),
            "seconds_to_start": round(start_seconds, 1),
            "seconds_until_all_waiting": round(all_waiting_seconds, 1),
            "seconds_to_answer_all_by_update_fresh_worker": round(answer_seconds, 1),
            "seconds_until_all_completed": round(done_seconds, 1),
            **(parts if components else {}),
        }
    except BaseException as exc:
        failed = exc
        print(f"bench failed; worker logs kept in {tmp}", file=sys.stderr)
        raise
    finally:
        await stop_worker(proc)
        if failed is None:
            shutil.rmtree(tmp, ignore_errors=True)  # kept (with the worker logs) when the run failed


async def read_components(proc: Any, stats_path: Path, n: int, one: Any) -> dict[str, Any]:
    """With N waiting: the worker's parts (``memory_parts``) before and after a trim, less the baseline's,
    per waiting workflow in KiB; and the size of one waiting workflow's history (``one``, its handle)."""
    proc.send_signal(signal.SIGUSR2)
    for _ in range(100):
        await asyncio.sleep(0.5)
        lines = [json.loads(x) for x in stats_path.read_text().splitlines()] if stats_path.exists() else []
        if len(lines) >= 4:
            break
    else:
        raise RuntimeError(f"the worker wrote {len(lines)} of the 4 readings to {stats_path}")
    base_before, base_after, wait_before, wait_after = lines[:4]

    def per(wait: dict[str, int], base: dict[str, int]) -> dict[str, float]:
        keys = [k for k in wait if k != "when"]
        return {k: round((wait[k] - base.get(k, 0)) / n / 1024, 1) for k in keys}

    return {
        "parts_per_waiting": {"before_trim": per(wait_before, base_before), "after_trim": per(wait_after, base_after)},
        "history_size": history_size(await one.fetch_history()),
    }


def history_size(history: Any) -> dict[str, int]:
    """A run's history: events, serialized bytes, and bytes of the payloads in it (inputs, results, memos,
    search attributes, headers)."""
    events = history.events
    return {
        "events": len(events),
        "bytes": sum(e.ByteSize() for e in events),
        "payload_bytes": sum(payload_bytes(e) for e in events),
    }


def payload_bytes(msg: Any) -> int:
    if msg.DESCRIPTOR.full_name == "temporal.api.common.v1.Payload":
        return int(msg.ByteSize())
    total = 0
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            if field.message_type.fields_by_name["value"].message_type is None:
                continue
            values = list(value.values())
        else:
            values = list(value) if field.is_repeated else [value]
        total += sum(payload_bytes(v) for v in values)
    return total


async def count_attempts(handles: list[Any]) -> tuple[int, int]:
    """Activity attempts past the first in these sessions' histories (a loaded worker must not be taken for
    dead: a model step then runs again after a heartbeat timeout), and the model steps they scheduled."""
    from agent_tools._activity_io import ACTIVITY_LLM_STEP

    retried = steps = 0
    why: dict[str, int] = {}
    for h in handles:
        for e in (await h.workflow.fetch_history()).events:
            if e.HasField("activity_task_scheduled_event_attributes"):
                steps += e.activity_task_scheduled_event_attributes.activity_type.name == ACTIVITY_LLM_STEP
            attrs = e.activity_task_started_event_attributes
            if e.HasField("activity_task_started_event_attributes") and attrs.attempt > 1:
                retried += 1
                # The attempt's start names the failure before it (a heartbeat timeout, an error).
                reason = attrs.last_failure.message[:80] or "?"
                why[reason] = why.get(reason, 0) + 1
    if why:
        print(f"  retried attempts, by the failure before them: {why}", flush=True)
    return retried, steps


async def answer_once(handle: Any) -> None:
    """The update that answers, sent again with the same id when its RPC times out: a fresh worker replays
    every session it is asked about, and on a loaded machine some updates outlast the client's deadline or
    meet a workflow task that timed out (the server takes a repeated update id as the same update)."""
    from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
    from temporalio.service import RPCError

    from agent_tools.contracts._human import AnswerAccepted, parse_answer_payload

    request = parse_answer_payload({QUESTION: "dayjs"})
    update_id = f"bench-answer-{uuid.uuid4().hex}"
    for attempt in range(10):
        try:
            await handle.workflow.execute_update("answer_questions", request, id=update_id, result_type=AnswerAccepted)
            return
        except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError):
            # RPCError: "Workflow Task in failed state", a replay that outlasted its task timeout.
            if attempt == 9:
                raise
            await asyncio.sleep(1.0 + attempt)


async def start_worker(
    args: tuple[str, ...], log_path: Path, root: Path = ROOT, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """The worker in a subprocess; it logs to a file (a pipe nobody reads would fill up and block it).
    ``root`` is the checkout whose code it runs (its own copy of this script puts it first on the path)."""
    script = root / "bench" / "askuser_memory.py"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), *args, stdout=log, stderr=log, cwd=str(root), env={**os.environ, **(env or {})}
        )
    for _ in range(600):
        if "READY" in log_path.read_text(errors="replace") or proc.returncode is not None:
            break
        await asyncio.sleep(0.1)
    if "READY" not in log_path.read_text(errors="replace"):
        raise RuntimeError(f"worker did not start, see {log_path}")
    return proc


async def stop_worker(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), timeout=20)
    except TimeoutError:
        proc.kill()
        await proc.wait()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        address, task_queue, database_url, model, cache = sys.argv[2:7]
        asyncio.run(run_worker(address, task_queue, database_url, model, int(cache)))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--bare-worker":
        address, task_queue, cache = sys.argv[2:5]
        asyncio.run(run_bare_worker(address, task_queue, int(cache)))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--cache", type=int, default=1000, help="worker max_cached_workflows (SDK default 1000)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating engine / bare rounds")
    parser.add_argument(
        "--workflow-threads",
        type=int,
        default=0,
        help="threads of both workers' workflow task executor (0: the SDK's default, one per task slot)",
    )
    parser.add_argument(
        "--batches", type=int, default=1,
        help="start the sessions in this many batches, reading RSS after each: the slope past the first batch",
    )  # fmt: skip
    parser.add_argument("--before", type=Path, help="a checkout of older code, run first in every round")
    parser.add_argument(
        "--components", action="store_true",
        help="also the worker's memory by part (RSS, malloc, pymalloc) per waiting workflow, engine and bare",
    )  # fmt: skip
    parser.add_argument(
        "--trace-python", action="store_true",
        help="with --components: tracemalloc from the baseline on in both workers (the Python heap's share)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", action="store_true",
        help="instead: one engine run under tracemalloc, printing where the waiting sessions' Python memory went",
    )  # fmt: skip
    args = parser.parse_args()
    if args.rounds < 1 or args.sessions < 1 or not 1 <= args.batches <= args.sessions:
        parser.error("--rounds and --sessions must be positive, --batches between 1 and --sessions")
    if args.before is not None and not (args.before / "bench" / "askuser_memory.py").is_file():
        parser.error(f"--before {args.before}: no bench/askuser_memory.py there")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    if args.trace_python:
        os.environ[TRACE_ENV] = "1"
    if args.workflow_threads:
        os.environ[THREADS_ENV] = str(args.workflow_threads)  # the workers inherit it
    if args.profile:
        asyncio.run(profile_once(args.sessions, args.cache))
        return
    asyncio.run(compare(args.sessions, args.cache, args.rounds, args.before, args.batches, args.components))


def print_parts(r: int, engine: dict[str, Any], bare: dict[str, Any]) -> None:
    """``--components``: one round's memory by part per waiting workflow (KiB), engine / bare."""
    for when in ("before_trim", "after_trim"):
        e, b = engine["parts_per_waiting"][when], bare["parts_per_waiting"][when]
        print(f"  round {r} parts {when}, KiB each, engine / bare: "
              + ", ".join(f"{k} {e[k]} / {b.get(k, '-')}" for k in e), flush=True)  # fmt: skip
    print(f"  round {r} one waiting history, engine / bare: "
          + ", ".join(f"{k} {engine['history_size'][k]} / {bare['history_size'][k]}" for k in bare["history_size"]))  # fmt: skip


def print_parts_median(parts: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """``--components``: the medians over the rounds, with their spread, engine / bare."""
    import statistics

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"

    for when in ("before_trim", "after_trim"):
        keys = list(parts[0][0]["parts_per_waiting"][when])
        cells = []
        for k in keys:
            e = [p[0]["parts_per_waiting"][when][k] for p in parts]
            b = [p[1]["parts_per_waiting"][when].get(k, 0.0) for p in parts]
            cells.append(f"{k} {spread(e)} / {spread(b)}")
        print(f"median parts {when}, KiB per waiting workflow, engine / bare: " + "; ".join(cells))


async def profile_once(n: int, cache: int) -> None:
    from agent_tools._devserver import start_dev_server

    env = await start_dev_server(ui=False)
    try:
        figures = await drive(env, n, cache, profile=True)
        print(
            f"RSS grew {figures['delta_kib']} KiB for {n} waiting sessions ({figures['per_waiting_session_kib']} KiB each)"
        )
    finally:
        await env.shutdown()


async def compare(
    n: int, cache: int, rounds: int, before: Path | None = None, batches: int = 1, components: bool = False
) -> None:
    import statistics

    from agent_tools._devserver import start_dev_server

    env = await start_dev_server(ui=False)
    engine_kib: list[float] = []
    before_kib: list[float] = []
    bare_kib: list[float] = []
    trimmed_kib: list[float] = []
    before_trimmed_kib: list[float] = []
    # The slopes (KiB each waiting one adds past the first batch), with --batches above 1.
    slopes: dict[str, list[float]] = {"engine": [], "before": [], "bare": []}
    parts: list[tuple[dict[str, Any], dict[str, Any]]] = []
    try:
        for r in range(rounds):
            if before is not None:
                old = await drive(env, n, cache, before.resolve(), batches=batches)
                before_kib.append(old["delta_kib"] / n)
                if old["marginal_kib_per_waiting_session"] is not None:
                    slopes["before"].append(old["marginal_kib_per_waiting_session"])
            figures = await drive(env, n, cache, batches=batches, components=components)
            bare, bare_slope, bare_parts = await drive_bare(env, n, cache, batches, components)
            if components:
                parts.append((figures, bare_parts))
                print_parts(r + 1, figures, bare_parts)
            if figures["marginal_kib_per_waiting_session"] is not None and bare_slope is not None:
                slopes["engine"].append(figures["marginal_kib_per_waiting_session"])
                slopes["bare"].append(bare_slope)
            engine_kib.append(figures["delta_kib"] / n)
            trimmed_kib.append(figures["per_waiting_session_kib_after_malloc_trim"])
            if before is not None:
                before_trimmed_kib.append(old["per_waiting_session_kib_after_malloc_trim"])
            bare_kib.append(bare / n)
            told = f"before {before_kib[-1]:.1f} KiB (all waiting {old['worker_rss_all_waiting']}), " if before else ""
            print(f"round {r + 1}: {told}engine {engine_kib[-1]:.1f} KiB per waiting session (all waiting "
                  f"{figures['worker_rss_all_waiting']}), bare {bare_kib[-1]:.1f} "
                  f"KiB per waiting workflow, ratio {engine_kib[-1] / bare_kib[-1]:.2f}x", flush=True)  # fmt: skip
            if slopes["bare"]:
                print("  past the first batch, KiB each: "
                      + ", ".join(f"{k} {v[-1]:.1f}" for k, v in slopes.items() if v), flush=True)  # fmt: skip
            if r == rounds - 1:
                width = max(len(k) for k in figures)
                for key, value in figures.items():
                    print(f"  {key:<{width}}  {value}")
    finally:
        await env.shutdown()
    e, b = statistics.median(engine_kib), statistics.median(bare_kib)
    ratios = [x / y for x, y in zip(engine_kib, bare_kib, strict=True)]
    print(
        f"median: engine {e:.1f} KiB per waiting session (spread {min(engine_kib):.1f}-{max(engine_kib):.1f}; "
        f"target < 120), bare {b:.1f} KiB (spread {min(bare_kib):.1f}-{max(bare_kib):.1f}); ratio {e / b:.2f}x "
        f"(per round {' '.join(f'{x:.2f}' for x in ratios)})"
    )
    print(
        f"after malloc_trim (what the waiting sessions hold, without the freed heap the work left mapped): engine "
        f"{statistics.median(trimmed_kib):.1f} KiB (per round {' '.join(f'{x:.1f}' for x in trimmed_kib)})"
        + (f", before {statistics.median(before_trimmed_kib):.1f} KiB (per round "
           f"{' '.join(f'{x:.1f}' for x in before_trimmed_kib)})" if before_trimmed_kib else "")
    )  # fmt: skip
    if slopes["bare"]:
        print(
            "past the first batch (the slope, without what a worker pays once under load), median KiB each: "
            + ", ".join(
                f"{k} {statistics.median(v):.1f} (per round {' '.join(f'{x:.1f}' for x in v)})"
                for k, v in slopes.items()
                if v
            )
        )
    if parts:
        print_parts_median(parts)
    if before_kib:
        m = statistics.median(before_kib)
        print(
            f"before: {m:.1f} KiB per waiting session (per round {' '.join(f'{x:.1f}' for x in before_kib)}); "
            f"engine/before per round {' '.join(f'{x / y:.2f}' for x, y in zip(engine_kib, before_kib, strict=True))}"
        )


if __name__ == "__main__":
    from agent_tools._process_exit import run_and_exit

    run_and_exit(main)
