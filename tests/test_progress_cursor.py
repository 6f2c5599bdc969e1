"""The event stream's cursors: what they hold, and the ones refused (malformed, another session's)."""

from __future__ import annotations

import pytest

from agent_tools._progress_resume import CursorRefused, ProgressCursor, session_tag

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
