"""The event stream's cursors: what they hold, the ones refused (malformed, another session's), and the
tree's merge they come from."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent_tools import _progress_resume as resume
from agent_tools._activity_io import ProgressEvent
from agent_tools._progress_resume import CursorRefused, ProgressCursor, follow_tree, session_tag

ROOT = "session-1"


def test_a_cursor_round_trips_with_its_sub_agents() -> None:
    cursor = ProgressCursor(ROOT, {ROOT: 42, f"{ROOT}/sub-1": 7, f"{ROOT}/sub-1/sub-2": 0})
    text = cursor.encode()
    assert text == f"{session_tag(ROOT)}.42,sub-1.7,sub-1/sub-2.0"
    assert ProgressCursor.decode(ROOT, text) == cursor
    assert ProgressCursor.decode(ROOT, ProgressCursor.start(ROOT).encode()).offsets == {ROOT: 0}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("garbage", "not <name>.<offset>"),
        ("", "not <name>.<offset>"),
        (f"{session_tag('session-2')}.3", "another session"),
        ("zzzzzzzz.3", "8 hex digits"),
        (f"{session_tag(ROOT)}." + "9" * 40, "not <name>.<offset>"),
        (f"{session_tag(ROOT)}.-1", "not <name>.<offset>"),
        (f"{session_tag(ROOT)}.１２", "not <name>.<offset>"),  # full-width digits are digits to isdigit
        (f"{session_tag(ROOT)}.1,other-session.2", "not a sub-agent"),
        (f"{session_tag(ROOT)}.1,sub-1/../x.2", "not a sub-agent"),
        (f"{session_tag(ROOT)}.1,sub-1", "not <name>.<offset>"),
        (f"{session_tag(ROOT)}.1\x00", "not <name>.<offset>"),
        ("1" * 9000, "at most"),
    ],
)
def test_cursors_that_are_refused(text: str, reason: str) -> None:
    with pytest.raises(CursorRefused) as caught:
        ProgressCursor.decode(ROOT, text)
    assert reason in str(caught.value)
    assert len(str(caught.value)) < 300  # a refusal quotes a bounded part of what it got


# The tree's merge, over streams of a test's own (each yields its items from the offset asked, after its
# delay), resumed from every cursor it gave.

Streams = dict[str, list[tuple[float, str, dict[str, object]]]]  # session -> (delay, kind, data) by offset


def _fake(streams: Streams) -> Any:
    async def follow(
        temporal: object, sid: str, topic: str, offset: int, result_type: object, *, interval: float
    ) -> AsyncIterator[tuple[int, ProgressEvent]]:
        for at, (delay, kind, data) in enumerate(streams[sid]):
            if at >= offset:
                await asyncio.sleep(delay)
                yield at, ProgressEvent.model_validate({"kind": kind, "session_id": sid, "data": data})

    return follow


async def _read(cursor: ProgressCursor) -> list[tuple[str, str, int]]:
    return [(i.cursor, i.event.session_id, i.offset) async for i in follow_tree(None, cursor)]  # type: ignore[arg-type]


CHILD = f"{ROOT}/sub-1"
GRANDCHILD = f"{ROOT}/sub-1/sub-1"
TREE: Streams = {
    ROOT: [
        (0, "turn_started", {}),
        (0, "subagent_started", {"id": CHILD}),
        (0, "subagent_done", {"id": CHILD}),  # published before the child's last words are read
        (0, "turn_finished", {}),
    ],
    CHILD: [
        (0.05, "subagent_started", {"id": GRANDCHILD}),
        (0.05, "subagent_done", {"id": GRANDCHILD}),
        (0.05, "assistant_message", {}),
    ],
    GRANDCHILD: [(0.05, "text_delta", {}), (0.05, "assistant_message", {})],
}


async def test_a_parent_waits_for_its_sub_agents_last_words_and_every_cursor_resumes_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(resume, "follow_with_offsets", _fake(TREE))
    whole = await _read(ProgressCursor.start(ROOT))
    order = [(sid, at) for _, sid, at in whole]
    assert order == [
        (ROOT, 0),
        (ROOT, 1),
        (CHILD, 0),
        (GRANDCHILD, 0),
        (GRANDCHILD, 1),
        (CHILD, 1),  # the child's subagent_done after its own sub-agent's last words
        (CHILD, 2),
        (ROOT, 2),  # the root's after the child's, and its later items behind it
        (ROOT, 3),
    ]
    # A finished sub-agent leaves the cursor; one being read is in it.
    assert ProgressCursor.decode(ROOT, whole[3][0]).offsets == {ROOT: 2, CHILD: 1, GRANDCHILD: 1}
    assert ProgressCursor.decode(ROOT, whole[-1][0]).offsets == {ROOT: 4}
    for i, (cursor, _, _) in enumerate(whole):
        rest = await _read(ProgressCursor.decode(ROOT, cursor))
        assert [(sid, at) for _, sid, at in rest] == order[i + 1 :], i


async def test_a_sub_agent_that_never_ends_holds_its_parent_a_moment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    streams: Streams = {
        ROOT: [(0, "subagent_started", {"id": CHILD}), (0, "subagent_done", {"id": CHILD}), (0, "turn_finished", {})],
        CHILD: [(0, "text_delta", {}), (60, "text_delta", {})],  # its stream does not end within the test
    }
    monkeypatch.setattr(resume, "follow_with_offsets", _fake(streams))
    monkeypatch.setattr(resume, "HOLD_SECONDS", 0.2)
    started = time.monotonic()
    order = [(sid, at) for _, sid, at in await _read(ProgressCursor.start(ROOT))]
    assert order == [(ROOT, 0), (CHILD, 0), (ROOT, 1), (ROOT, 2)]
    assert 0.2 <= time.monotonic() - started < 5
