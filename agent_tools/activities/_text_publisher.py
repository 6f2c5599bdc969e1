"""The model's text, live: the llm_step activity publishes what the provider streams to the session's
``progress`` topic while the step runs, and still returns the whole message as its result.

Replay never depends on the stream: the workflow reads only the activity's result. What subscribers see
is a preview whose rules ``agent_tools._live_text`` (the client side) applies:

* ``text_delta`` items carry ``position`` (the step's transcript position), ``attempt``, ``offset`` (the
  characters of this attempt published before) and ``text``.
* A retried step (attempt > 1) first publishes ``text_discard``: the partial text of earlier attempts of
  that step is void. Deltas of a lower attempt that still arrive (a worker cut off from the server that
  goes on streaming) are void too.
* The step's ``assistant_message`` (published by the workflow once the activity returned) holds the whole
  text: what the deltas did not bring is its tail.

Publishing from an activity is a signal to the workflow, and each signal is a history event and a
workflow task. So text is batched: the first batch goes 0.1 s after the first piece and the interval grows
with the step's age (a tenth of it, at most 2 s), so an 8-second reply costs about 30 signals and a
minute-long one about 60, while the first seconds stay lively. The tail still buffered when the model has
finished is not sent (the ``assistant_message`` brings it), so a reply that streams within 0.1 s costs no
signal at all. Items are bounded (4,000 characters each, 100,000 per step; past that, subscribers get the
rest from the final message), and a publish that fails never fails the step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from agent_tools._activity_io import ProgressEvent

log = logging.getLogger(__name__)

Publish = Callable[[list[ProgressEvent]], Awaitable[None]]

FIRST_INTERVAL = 0.1
MAX_INTERVAL = 2.0
MAX_ITEM_CHARS = 4_000
MAX_STEP_CHARS = 100_000
# One publish (a signal) that takes longer than this is given up: the step must not wait on the preview.
SEND_TIMEOUT = 5.0


def flush_interval(age: float) -> float:
    """Seconds until the next batch, for a step whose text began ``age`` seconds ago."""
    return min(MAX_INTERVAL, max(FIRST_INTERVAL, age / 10))


class TextPublisher:
    """The text sink of one model step's attempt; use as ``async with`` around the model call."""

    def __init__(
        self,
        publish: Publish,
        *,
        session_id: str,
        position: int,
        attempt: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._publish = publish
        self._session_id = session_id
        self._position = position
        self._attempt = attempt
        self._clock = clock
        self._buffer: list[str] = []
        self._began: float | None = None
        self._published = 0
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._sending: asyncio.Future[None] | None = None
        self.signals = 0

    def _event(self, kind: str, **data: Any) -> ProgressEvent:
        return ProgressEvent(
            kind=kind,  # type: ignore[arg-type]
            session_id=self._session_id,
            data={"position": self._position, "attempt": self._attempt, **data},
        )

    async def __aenter__(self) -> TextPublisher:
        if self._attempt > 1:
            # Earlier attempts may have streamed text that this attempt will not repeat word for word.
            await self._send([self._event("text_discard")])
        return self

    def __call__(self, text: str) -> None:
        if self._stopped or not text:
            return
        self._buffer.append(text)
        if self._began is None:
            self._began = self._clock()
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while not self._stopped:
            assert self._began is not None
            await asyncio.sleep(flush_interval(self._clock() - self._began))
            if self._buffer:
                # Shielded: a step that ends while a batch is on its way waits for it (see __aexit__), so
                # every signal sent reaches history before the activity's result does.
                self._sending = asyncio.ensure_future(self._flush())
                await asyncio.shield(self._sending)

    async def _flush(self) -> None:
        text = "".join(self._buffer)
        self._buffer.clear()
        room = MAX_STEP_CHARS - self._published
        if len(text) > room:
            text = text[:room]
            self._stopped = True
        items = []
        for start in range(0, len(text), MAX_ITEM_CHARS):
            piece = text[start : start + MAX_ITEM_CHARS]
            items.append(self._event("text_delta", offset=self._published, text=piece))
            self._published += len(piece)
        if items:
            await self._send(items)

    async def _send(self, events: list[ProgressEvent]) -> None:
        try:
            await asyncio.wait_for(self._publish(events), SEND_TIMEOUT)
            self.signals += 1
        except Exception as exc:  # the preview is best effort: the step's result is what counts
            log.info("live text of session %s stopped: %r", self._session_id, exc)
            self._stopped = True

    async def __aexit__(self, *exc: object) -> None:
        self._stopped = True  # the tail left in the buffer comes with the assistant_message
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._sending is not None and not self._sending.done():
            with contextlib.suppress(Exception):
                await self._sending


def stream_publisher() -> Publish:
    """Publishes to the progress topic of the workflow that scheduled the current activity."""
    from temporalio.contrib.workflow_streams import WorkflowStreamClient

    client = WorkflowStreamClient.from_within_activity(max_retry_duration=timedelta(seconds=SEND_TIMEOUT))
    topic = client.topic("progress", type=ProgressEvent)

    async def publish(events: list[ProgressEvent]) -> None:
        for event in events:
            topic.publish(event)
        await client.flush()

    return publish
