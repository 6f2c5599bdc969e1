"""Bench: one session waits on askUser for 30 simulated days while a loop ticks hourly, a message arrives
every hour and a subscriber follows its progress between the skips.

    python bench/long_wait.py                 # 30 days, the session's history budget at 500 events
    python bench/long_wait.py --days 3 --budget 300

Runs on the time-skipping test server: the driver skips an hour, sends a message, and again, for the whole
span; the session's turn stays parked on askUser and the run continues-as-new mid-wait whenever it reaches
its budget (``continue_as_new_after_events``). At the end the answer must complete the original askUser call
(one tool result), and the largest run of the chain must stay below a tenth of Temporal's warning limits
(10,240 events or 10 MB; the hard limits are 51,200 events and 50 MB). It prints every run's event count
and bytes. ``tests/test_continue_as_new_mid_wait.py`` runs it over a shorter span and asserts the bound.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Temporal's warning limits for one run's history (docs.temporal.io/workflow-execution/limits).
WARN_EVENTS = 10_240
WARN_BYTES = 10 * 1024 * 1024
QUESTION = {
    "question": "Which store should we use?",
    "header": "Store",
    "options": [{"label": "SQLite", "description": "embedded"}, {"label": "PostgreSQL", "description": "scale"}],
}
SCRIPT: list[Any] = [
    {
        "repeat_last": True,
        "turns": [
            {
                "say": "",
                "tool_calls": [
                    {
                        "name": "createLoop",
                        "arguments": {"prompt": "hourly check", "interval_seconds": 3600, "max_turns": 1000},
                    },
                    {"name": "askUser", "arguments": {"questions": [QUESTION]}},
                ],
            },
            {"say": "answered: {{tool_results:askUser}}"},
            {"say": "echo {{last_user}}"},
        ],
    }
]


@dataclass
class Figures:
    hours: int
    runs: list[tuple[int, int]] = field(default_factory=list)  # (events, bytes) of each run, oldest first
    progress_items: int = 0
    ask_results: list[str] = field(default_factory=list)
    answer_message: str | None = None
    seconds: float = 0.0

    @property
    def largest_events(self) -> int:
        return max(events for events, _ in self.runs)

    @property
    def largest_bytes(self) -> int:
        return max(size for _, size in self.runs)


async def chain_sizes(temporal: Any, workflow_id: str, first_run_id: str) -> list[tuple[int, int]]:
    """(events, bytes) of every run, following continue-as-new from the first run (the time-skipping server
    has no visibility listing)."""
    sizes: list[tuple[int, int]] = []
    run_id: str | None = first_run_id
    while run_id:
        history = await temporal.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        sizes.append((len(history.events), sum(e.ByteSize() for e in history.events)))
        last = history.events[-1]
        run_id = (
            last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            if last.HasField("workflow_execution_continued_as_new_event_attributes")
            else None
        )
    return sizes


async def until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


class Subscriber:
    """Follows the session's progress stream across continue-as-new by the stream's poll query, as
    ``SessionHandle.progress`` does, and stops asking while the driver moves the clock: the test server holds
    its clock still while a query is in flight, and for good when the query's caller gives up on it."""

    def __init__(self, client: Any, session_id: str, figures: Figures) -> None:
        self._handle = client.temporal.get_workflow_handle(session_id)
        self._figures = figures
        self._next_offset = 0
        self._open = asyncio.Event()
        self._asking = asyncio.Lock()  # held while a query is in flight
        self._open.set()
        self._task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        from temporalio.client import WorkflowExecutionStatus

        from agent_tools._progress_poll import _poll

        while True:
            await self._open.wait()
            async with self._asking:
                if not self._open.is_set():
                    continue
                closed = (await self._handle.describe()).status != WorkflowExecutionStatus.RUNNING
                result = await _poll(self._handle, "progress", self._next_offset)  # None: ask again
            if result is not None:
                self._figures.progress_items += len(result.items)
                self._next_offset = result.next_offset
                if closed and not result.more_ready:
                    return
            await asyncio.sleep(0.1)

    async def pause(self) -> None:
        """Return once no query is in flight, and ask none until :meth:`resume`."""
        self._open.clear()
        async with self._asking:
            pass

    def resume(self) -> None:
        self._open.set()

    async def settle(self, items: int, *, timeout: float) -> None:
        """Give the subscriber until ``items`` items have been seen in all, or ``timeout`` seconds (a turn
        may publish nothing new yet): what it misses now it reads after the next skip."""
        deadline = time.monotonic() + timeout
        while self._figures.progress_items < items and time.monotonic() < deadline:
            if self._task.done():
                self._task.result()  # a failed poll fails the bench
                return
            await asyncio.sleep(0.05)

    async def finished(self, *, timeout: float) -> None:
        """Wait for the stream to end, as it does once the session has closed and its last items were read."""
        await asyncio.wait_for(self._task, timeout)


async def long_wait(env: Any, settings: Any, *, hours: int, budget: int = 500) -> Figures:
    """Drive one session through ``hours`` simulated hours parked on askUser; return the figures."""
    from agent_tools.testing import write_script
    from tests.support.temporal import running_worker, skip_time

    started = time.monotonic()
    figures = Figures(hours=hours)
    with tempfile.TemporaryDirectory() as tmp:
        settings = settings.model_copy(update={"model": write_script(Path(tmp) / "long_wait.json", SCRIPT)})
        async with running_worker(env, settings) as client:
            handle = await client.start_session(
                "choose a store, then keep checking every hour",
                tools=["createLoop", "askUser"],
                keep_alive=True,
                options={"continue_as_new_after_events": budget},
            )
            first_run = (await handle.workflow.describe()).run_id

            async def asked() -> bool:
                return bool(await handle.pending_questions())

            await until(asked, 60, "the question")

            subscriber = Subscriber(client, handle.id, figures)
            for hour in range(hours):
                # No query may be in flight while the test server moves its clock: one that is holds the
                # clock still, and under load the skip then times out. The subscriber pauses for the skip.
                await subscriber.pause()
                await skip_time(env, 3600)
                subscriber.resume()
                await handle.send(f"hourly message {hour}")
                await subscriber.settle(figures.progress_items + 1, timeout=5)
            assert [q.question for q in await handle.pending_questions()] == [QUESTION["question"]]
            await handle.answer_questions({QUESTION["question"]: "SQLite"})

            async def answered() -> bool:
                entries = await handle.transcript(limit=20)
                figures.ask_results = [e.content for e in entries if e.role == "tool" and e.name == "askUser"]
                said = [e.content for e in entries if e.role == "assistant" and e.content.startswith("answered: ")]
                figures.answer_message = said[0] if said else None
                return figures.answer_message is not None

            await until(answered, 120, "the answer to complete the askUser call")
            await handle.stop("bench done")
            await handle.result()
            await subscriber.finished(timeout=60)
            figures.runs = await chain_sizes(env.client, handle.id, first_run)
    figures.seconds = time.monotonic() - started
    return figures


def report(figures: Figures) -> str:
    lines = [
        f"{figures.hours} simulated hours ({figures.hours / 24:g} days) parked on askUser, {len(figures.runs)} runs"
    ]
    lines += [
        f"  run {i + 1:>3}: {events:>5} events  {size:>9,} bytes" for i, (events, size) in enumerate(figures.runs)
    ]
    lines.append(
        f"largest run: {figures.largest_events} events (limit for this bench {WARN_EVENTS // 10}), "
        f"{figures.largest_bytes:,} bytes (limit {WARN_BYTES // 10:,})"
    )
    lines.append(f"askUser results: {len(figures.ask_results)}; progress items seen: {figures.progress_items}")
    lines.append(f"answer: {(figures.answer_message or '')[:120]}")
    lines.append(f"wall time {figures.seconds:.1f} s")
    return "\n".join(lines)


def check(figures: Figures) -> None:
    """The bench's bound: the largest run below a tenth of the warning limits, one result for the call, and
    progress seen by the subscriber."""
    assert figures.largest_events < WARN_EVENTS // 10, figures.runs
    assert figures.largest_bytes < WARN_BYTES // 10, figures.runs
    assert len(figures.ask_results) == 1 and "SQLite" in figures.ask_results[0], figures.ask_results
    assert figures.answer_message is not None and "SQLite" in figures.answer_message
    assert figures.progress_items > 0, "the subscriber saw no progress"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--budget", type=int, default=500, help="continue_as_new_after_events of the session")
    args = parser.parse_args()
    from agent_tools._devserver import start_time_skipping
    from agent_tools._settings import Settings

    env = await start_time_skipping()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(
                database_url=f"sqlite+aiosqlite:///{tmp}/store.sqlite",
                task_queue="long-wait",
                agents_file=None,
                openai_api_key=None,
                anthropic_api_key=None,
            )
            figures = await long_wait(env, settings, hours=round(args.days * 24), budget=args.budget)
    finally:
        await env.shutdown()
    print(report(figures))
    check(figures)
    print("OK: below a tenth of Temporal's warning limits, and the answer completed the original call")


if __name__ == "__main__":
    from agent_tools._process_exit import run_and_exit

    run_and_exit(lambda: asyncio.run(main()))
