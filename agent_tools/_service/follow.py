"""Following a session tree for an HTTP stream: the items of :meth:`SessionHandle.resumable_progress` from
a cursor until the root's stream ends, read by a task of their own (a keep-alive never cancels a read half
done), in lists of the items ready together, with a ``None`` for each ``keepalive`` seconds of quiet.

A read that fails (Temporal busy or away for a moment, a poll that timed out) goes on from the last item's
cursor, which loses nothing and repeats nothing, for up to ``retry_seconds`` of failures in a row; only then
does the failure end the stream. No such session and a refused cursor are final at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from agent_tools._errors import SessionError
from agent_tools._progress_resume import CursorRefused

__all__ = ["RETRY_SECONDS", "follow"]

# How long reads may keep failing in a row before the stream gives up (an overloaded server answers late
# for seconds at a time; the stream should ride that out, not end).
RETRY_SECONDS = 30.0
_BACKOFF = (0.2, 0.5, 1.0, 2.0)
# Items one write holds at most.
MAX_BATCH = 64
# A read that ran this long before it failed was working: its failure starts a new count.
_WORKED_SECONDS = 5.0


async def follow(
    handle: Any, cursor: str | None, *, poll: float, keepalive: float, retry_seconds: float = RETRY_SECONDS
) -> AsyncIterator[Any]:
    """The tree's items from ``cursor`` until the root's stream ends, in lists of what was ready together
    (a stream writes each list at once), and None each ``keepalive`` seconds of quiet; the last failure
    once reads have failed for ``retry_seconds`` in a row."""
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=256)
    done = object()
    loop = asyncio.get_running_loop()

    async def pump() -> None:
        at, failures, failing_since = cursor, 0, 0.0
        while True:
            began = loop.time()
            try:
                async for item in handle.resumable_progress(at, poll=timedelta(seconds=poll)):
                    at, failures = item.cursor, 0
                    await queue.put(item)
                await queue.put(done)
                return
            except (SessionError, CursorRefused) as exc:  # no such session, or not its cursor: final
                await queue.put(exc)
                return
            except Exception as exc:  # a read that failed: go on from the last cursor
                if failures == 0 or loop.time() - began >= _WORKED_SECONDS:  # it had been reading fine
                    failures, failing_since = 0, loop.time()
                failures += 1
                if loop.time() - failing_since >= retry_seconds:
                    await queue.put(exc)
                    return
                await asyncio.sleep(_BACKOFF[min(failures, len(_BACKOFF)) - 1])

    task = asyncio.create_task(pump())
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), keepalive)
            except TimeoutError:
                yield None
                continue
            batch = [item]
            while not queue.empty() and len(batch) < MAX_BATCH:  # what is ready now goes out in one write
                batch.append(queue.get_nowait())
            items = [i for i in batch if i is not done and not isinstance(i, BaseException)]
            if items:
                yield items
            for i in batch:
                if i is done:
                    return
                if isinstance(i, BaseException):
                    raise i
    finally:
        task.cancel()
