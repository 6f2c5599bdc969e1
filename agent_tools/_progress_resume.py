"""A session tree's progress that a reader can resume: every item comes with a cursor, and following again
from an item's cursor yields exactly the items after it (none lost, none twice).

The cursor holds, for the root and for each sub-agent still being read, the offset of its next item in
that session's own progress stream::

    3f9a0c1d.42,sub-1.7,sub-1/sub-2.3

``3f9a0c1d`` names the root (a digest of its id: a cursor of another session is refused), ``42`` is the
root's next offset, and each further entry is a sub-agent (its id after the root's ``/``) and its next
offset. A sub-agent enters the cursor with its parent's ``subagent_started`` item and leaves it once its
stream has ended and every item of it was yielded.

A parent's ``subagent_done`` waits (a moment at most) for the sub-agent's stream to end, so its last words
come first; the parent's later items wait behind it. So what has been yielded of each session is always
a prefix of its stream, which is what lets one offset per session say where to go on.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from temporalio.client import Client

from agent_tools._activity_io import ProgressEvent
from agent_tools._errors import InvalidInput
from agent_tools._progress_poll import follow_with_offsets

__all__ = ["CursorRefused", "ProgressCursor", "ResumableItem", "follow_tree"]

# What a cursor may hold: more entries or digits than this is not a cursor this module wrote.
MAX_CURSOR_CHARS = 8_192
MAX_OFFSET_DIGITS = 15
_CHILD = re.compile(r"sub-[0-9]{1,9}(?:/sub-[0-9]{1,9}){0,31}")
# How long a parent's subagent_done waits for the sub-agent's stream to end.
HOLD_SECONDS = 2.0


class CursorRefused(InvalidInput):
    """A cursor (an event stream's ``Last-Event-ID``) that is malformed or names another session."""


def session_tag(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:8]


@dataclass(frozen=True)
class ProgressCursor:
    """Next offsets by session id (the root's always present)."""

    root: str
    offsets: dict[str, int] = field(default_factory=dict)

    @classmethod
    def start(cls, root: str) -> ProgressCursor:
        return cls(root, {root: 0})

    def encode(self) -> str:
        prefix = len(self.root) + 1
        parts = [f"{session_tag(self.root)}.{self.offsets.get(self.root, 0)}"]
        parts.extend(f"{sid[prefix:]}.{n}" for sid, n in self.offsets.items() if sid != self.root)
        return ",".join(parts)

    @classmethod
    def decode(cls, root: str, text: str) -> ProgressCursor:
        """The cursor ``text`` of session ``root``.

        Raises:
            CursorRefused: it is not a cursor, or it is one of another session (the reason says which).
        """
        if len(text) > MAX_CURSOR_CHARS:
            raise CursorRefused(f"the cursor is {len(text):,} characters; a cursor is at most {MAX_CURSOR_CHARS:,}")
        entries = text.strip().split(",")
        tag, offset = _entry(entries[0], "the root")
        if not re.fullmatch(r"[0-9a-f]{8}", tag):
            raise CursorRefused(f"malformed cursor {text[:80]!r}: it starts with 8 hex digits naming the session")
        if tag != session_tag(root):
            raise CursorRefused(f"the cursor belongs to another session, not {root!r}")
        offsets = {root: offset}
        for entry in entries[1:]:
            child, n = _entry(entry, "a sub-agent")
            if not _CHILD.fullmatch(child):
                raise CursorRefused(f"malformed cursor: {child[:80]!r} is not a sub-agent of the session")
            offsets[f"{root}/{child}"] = n
        return cls(root, offsets)


def _entry(entry: str, what: str) -> tuple[str, int]:
    name, dot, digits = entry.rpartition(".")
    if not dot or not digits.isdigit() or not digits.isascii() or len(digits) > MAX_OFFSET_DIGITS:
        raise CursorRefused(f"malformed cursor: the entry of {what} {entry[:80]!r} is not <name>.<offset>")
    return name, int(digits)


@dataclass(frozen=True)
class ResumableItem:
    """One progress item, its place in its session's stream, and the cursor to go on after it."""

    cursor: str
    offset: int
    event: ProgressEvent


@dataclass
class _Stream:
    items: deque[tuple[int, ProgressEvent]] = field(default_factory=deque)
    ended: bool = False
    # The sub-agent whose stream must end before this stream goes on, and until when it may hold it.
    blocked_on: str | None = None
    deadline: float = 0.0


class _Tree:
    def __init__(self, temporal: Client, cursor: ProgressCursor, poll: float) -> None:
        self.temporal, self.root, self.poll = temporal, cursor.root, poll
        self.offsets = dict(cursor.offsets)
        self.streams: dict[str, _Stream] = {}
        self.tasks: list[asyncio.Task[None]] = []
        # Items: (session id, offset, event), or (session id, None, None) at a stream's end, or the root's error.
        self.queue: asyncio.Queue[tuple[str, int | None, ProgressEvent | None] | BaseException] = asyncio.Queue()

    def follow(self, session_id: str, offset: int) -> None:
        self.streams[session_id] = _Stream()
        self.offsets.setdefault(session_id, offset)
        self.tasks.append(asyncio.create_task(self._pump(session_id, offset)))

    async def _pump(self, session_id: str, offset: int) -> None:
        try:
            async for at, event in follow_with_offsets(
                self.temporal, session_id, "progress", offset, ProgressEvent, interval=self.poll
            ):
                await self.queue.put((session_id, at, event))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # The root's failure ends the iteration with its error; a sub-agent's ends only its part.
            if session_id == self.root:
                await self.queue.put(exc)
                return
        await self.queue.put((session_id, None, None))

    def done(self, session_id: str) -> bool:
        stream = self.streams[session_id]
        return stream.ended and not stream.items and stream.blocked_on is None

    def flush(self, session_id: str, now: float) -> list[ResumableItem]:
        """What ``session_id`` can let out now, and what that lets out of the streams held behind it."""
        out: list[ResumableItem] = []
        pending = [session_id]
        while pending:
            sid = pending.pop()
            stream = self.streams[sid]
            while stream.items and stream.blocked_on is None:
                offset, event = stream.items[0]
                child = event.data.get("id")
                if (
                    event.kind == "subagent_done"
                    and isinstance(child, str)
                    and child in self.streams
                    and not self.done(child)
                    and stream.deadline == 0.0
                ):
                    stream.blocked_on, stream.deadline = child, now + HOLD_SECONDS
                    break
                stream.items.popleft()
                stream.deadline = 0.0
                self.offsets[sid] = offset + 1
                if event.kind == "subagent_started" and isinstance(child, str):
                    self._started(child)
                out.append(ResumableItem(ProgressCursor(self.root, self.offsets).encode(), offset, event))
            if sid != self.root and self.done(sid):
                self.offsets.pop(sid, None)
                pending.extend(self._unblock(sid))
        return out

    def _started(self, child: str) -> None:
        suffix = child[len(self.root) + 1 :]
        if child not in self.streams and child.startswith(self.root + "/") and _CHILD.fullmatch(suffix):
            self.follow(child, 0)

    def _unblock(self, child: str) -> list[str]:
        """The streams held behind ``child``, let go."""
        released = []
        for sid, stream in self.streams.items():
            if stream.blocked_on == child:
                stream.blocked_on = None  # deadline kept set: the held item goes out on the next flush
                released.append(sid)
        return released

    def expire(self, now: float) -> list[ResumableItem]:
        out: list[ResumableItem] = []
        for sid, stream in list(self.streams.items()):
            if stream.blocked_on is not None and stream.deadline <= now:
                stream.blocked_on = None
                out.extend(self.flush(sid, now))
        return out

    def next_deadline(self) -> float | None:
        deadlines = [s.deadline for s in self.streams.values() if s.blocked_on is not None]
        return min(deadlines) if deadlines else None


async def follow_tree(temporal: Client, cursor: ProgressCursor, *, poll: float = 0.1) -> AsyncIterator[ResumableItem]:
    """The progress of ``cursor.root`` and its sub-agents from ``cursor`` on, until the root's stream ends.

    Raises:
        RPCError: NOT_FOUND when the root does not exist (the caller names it).
    """
    loop = asyncio.get_running_loop()
    tree = _Tree(temporal, cursor, poll)
    for sid, offset in cursor.offsets.items():
        tree.follow(sid, offset)
    try:
        while True:
            deadline = tree.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                item = await asyncio.wait_for(tree.queue.get(), timeout)
            except TimeoutError:
                for out in tree.expire(loop.time()):
                    yield out
                if tree.done(tree.root):
                    return  # the root's end was held behind a sub-agent that did not end in time
                continue
            if isinstance(item, BaseException):
                raise item
            sid, at, event = item
            stream = tree.streams[sid]
            if at is None or event is None:
                stream.ended = True
            else:
                stream.items.append((at, event))
            for out in tree.flush(sid, loop.time()):
                yield out
            if tree.done(tree.root):
                return
    finally:
        for task in tree.tasks:
            task.cancel()
