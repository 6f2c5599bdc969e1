"""The model's text, live: batching in the llm_step activity, the discard of a retried step, and the
reader's reassembly (agent_tools._live_text), in process and through a real Temporal session."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agent_tools._activity_io import ProgressEvent
from agent_tools._client import SessionHandle
from agent_tools._live_text import LiveText, TextUpdate
from agent_tools._settings import Settings
from agent_tools.activities._text_publisher import MAX_ITEM_CHARS, MAX_STEP_CHARS, TextPublisher, flush_interval
from tests.support.fixture_types import Script, WorkerFor


def ev(kind: str, sid: str = "s", **data: Any) -> ProgressEvent:
    return ProgressEvent(kind=kind, session_id=sid, data=data)  # type: ignore[arg-type]


def shown(updates: list[TextUpdate]) -> str:
    """What a terminal that honours the updates ends up showing."""
    text = ""
    for u in updates:
        if u.action == "append":
            text += u.text
        elif u.action == "discard":
            assert text.endswith(u.text), (text, u.text)
            text = text[: len(text) - len(u.text)]
    return text


def test_reader_completes_from_the_final_message_and_honours_discards() -> None:
    live = LiveText()
    out: list[TextUpdate] = []
    for event in [
        ev("text_delta", position=3, attempt=1, offset=0, text="Hello wo"),
        ev("text_discard", position=3, attempt=2),
        ev("text_delta", position=3, attempt=1, offset=8, text="rld"),  # the old attempt, still talking
        ev("text_delta", position=3, attempt=2, offset=0, text="Hi "),
        ev("text_delta", position=3, attempt=2, offset=0, text="Hi the"),  # overlaps what was shown
        ev("text_delta", position=3, attempt=2, offset=9, text="zzz"),  # a batch went missing
        ev("assistant_message", content="Hi there, friend.", position=3),
        ev("text_delta", position=3, attempt=2, offset=6, text="late"),  # after the end: nothing
    ]:
        out += live.feed(event)
    assert shown(out) == "Hi there, friend."
    assert [u.action for u in out].count("end") == 1
    assert TextUpdate("discard", "s", "Hello wo") in out


def test_reader_without_deltas_and_with_an_unrelated_final_message() -> None:
    live = LiveText()
    assert shown(live.feed(ev("assistant_message", content="whole", position=0))) == "whole"
    out = live.feed(ev("text_delta", position=5, attempt=1, offset=0, text="par"))
    out += live.feed(ev("assistant_message", content="(model call failed: boom)"))  # no position: a notice
    assert shown(out) == "(model call failed: boom)"
    # A retried attempt whose text is not what was shown: the final message replaces it.
    out = live.feed(ev("text_delta", position=9, attempt=1, offset=0, text="abc"))
    out += live.feed(ev("assistant_message", content="xyz", position=9))
    assert shown(out) == "xyz"
    # Sessions of a tree do not mix.
    a = live.feed(ev("text_delta", "a", position=1, attempt=1, offset=0, text="A1"))
    b = live.feed(ev("text_delta", "b", position=1, attempt=1, offset=0, text="B1"))
    assert live.showing("a") == "A1" and live.showing("b") == "B1" and a != b


class Recorder:
    def __init__(self, fail: bool = False) -> None:
        self.batches: list[tuple[float, list[ProgressEvent]]] = []
        self.fail = fail

    async def __call__(self, events: list[ProgressEvent]) -> None:
        if self.fail:
            raise RuntimeError("server gone")
        await asyncio.sleep(0.01)  # a signal takes a moment
        self.batches.append((time.monotonic(), events))


def test_flush_interval_grows_with_the_step() -> None:
    assert flush_interval(0) == 0.1 and flush_interval(5) == 0.5 and flush_interval(600) == 2.0


async def test_a_quick_reply_costs_no_signal_and_a_slow_one_few() -> None:
    quick = Recorder()
    async with TextPublisher(quick, session_id="s", position=0, attempt=1) as sink:
        for word in ["all ", "at ", "once"]:
            sink(word)
    assert quick.batches == []  # the final message brings it all

    slow = Recorder()
    started = time.monotonic()
    async with TextPublisher(slow, session_id="s", position=4, attempt=1) as sink:
        for i in range(40):
            sink(f"w{i} ")
            await asyncio.sleep(0.025)
    elapsed = time.monotonic() - started
    items = [e for _, batch in slow.batches for e in batch]
    assert 3 <= len(slow.batches) <= elapsed / 0.1 + 1  # batched: never more than one per 100 ms
    assert all(e.kind == "text_delta" and e.data["position"] == 4 and e.data["attempt"] == 1 for e in items)
    text = "".join(e.data["text"] for e in items)
    assert "".join(f"w{i} " for i in range(40)).startswith(text) and text
    assert [e.data["offset"] for e in items] == [sum(len(x.data["text"]) for x in items[:i]) for i in range(len(items))]


async def test_retry_discards_first_items_are_bounded_and_failures_stay_inside() -> None:
    rec = Recorder()
    async with TextPublisher(rec, session_id="s", position=2, attempt=3) as sink:
        sink("x" * (MAX_STEP_CHARS + 5000))
        await asyncio.sleep(0.25)
        sink("more")
        await asyncio.sleep(0.25)
    kinds = [e.kind for _, batch in rec.batches for e in batch]
    assert kinds[0] == "text_discard" and rec.batches[0][1][0].data == {"position": 2, "attempt": 3}
    deltas = [e for _, batch in rec.batches for e in batch if e.kind == "text_delta"]
    assert all(len(e.data["text"]) <= MAX_ITEM_CHARS for e in deltas)
    assert sum(len(e.data["text"]) for e in deltas) == MAX_STEP_CHARS  # the rest comes with the final message

    broken = Recorder(fail=True)
    async with TextPublisher(broken, session_id="s", position=0, attempt=2) as sink:
        sink("never mind")
        await asyncio.sleep(0.2)
    assert broken.batches == []


# ---- through Temporal --------------------------------------------------------------------------------

TEXT = "Lisbon rewards slow walkers: start at Alfama, climb to the castle, and eat at Time Out Market."


async def _progress(handle: SessionHandle) -> list[ProgressEvent]:
    return [e async for e in handle.progress()]


async def test_session_streams_text_before_the_step_ends(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([{"say": TEXT, "word_seconds": 0.08}])
    async with worker_for() as client:
        handle = await client.start_session("plan Lisbon")
        first_delta: float | None = None
        final_at: float | None = None
        events: list[ProgressEvent] = []
        async for event in handle.progress(poll=__import__("datetime").timedelta(milliseconds=20)):
            events.append(event)
            if event.kind == "text_delta" and first_delta is None:
                first_delta = time.monotonic()
            if event.kind == "assistant_message":
                final_at = time.monotonic()
        result = await handle.result()
        history = await handle.workflow.fetch_history()
    assert first_delta is not None and final_at is not None and final_at - first_delta > 0.3
    kinds = [e.kind for e in events]
    assert kinds.index("step_started") < kinds.index("text_delta") < kinds.index("assistant_message")
    step = next(e for e in events if e.kind == "step_started")
    assert step.data["step"] == 1 and step.data["position"] == 1
    live = LiveText()
    assert shown([u for e in events for u in live.feed(e)]) == TEXT == result.final_message
    signals = [e for e in history.events if e.HasField("workflow_execution_signaled_event_attributes")]
    assert 2 <= len(signals) <= 16, len(signals)  # ~1.3 s of text in batches, not one signal per word
    # Watching wrote nothing: the subscriber polled by query, so no update of the stream is in the history.
    updates = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert updates == [], [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name for e in updates
    ]
    summaries = [
        e.user_metadata.summary.data.decode()
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert summaries == ['"model step 1 · scripted:' + settings.model.rsplit("/", 1)[-1] + '"']


async def test_retried_step_tells_subscribers_to_discard(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {
                "say": TEXT,
                "word_seconds": 0.06,
                "fail": {"status": 503, "attempts": 1, "after_words": 8, "retry_after": 0},
            }
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("plan Lisbon")
        events = await _progress(handle)
        result = await handle.result()
    deltas = [e for e in events if e.kind == "text_delta"]
    assert {e.data["attempt"] for e in deltas} == {1, 2}, [e.data for e in deltas]
    discard = [e for e in events if e.kind == "text_discard"]
    assert [d.data["attempt"] for d in discard] == [2]
    live = LiveText()
    updates = [u for e in events for u in live.feed(e)]
    assert shown(updates) == TEXT == result.final_message  # once, whole
    assert any(u.action == "discard" for u in updates)
    # A subscriber that ignored the discard would have shown attempt 1's words twice.
    naive = "".join(e.data["text"] for e in deltas)
    assert naive.count("Lisbon") == 2


@pytest.mark.parametrize("stream_text", [False])
async def test_streaming_can_be_switched_off(
    settings: Settings, script: Script, worker_for: WorkerFor, stream_text: bool
) -> None:
    settings.model = script([{"say": TEXT, "word_seconds": 0.02}])
    async with worker_for() as client:
        handle = await client.start_session("plan Lisbon", options={"stream_text": stream_text})
        events = await _progress(handle)
    assert "text_delta" not in [e.kind for e in events] and "assistant_message" in [e.kind for e in events]
