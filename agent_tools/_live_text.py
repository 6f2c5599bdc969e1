"""The model's streamed text, reassembled for a reader (the CLI, your UI). Pure.

Feed it every progress event of a session (or of a session tree: it keeps one state per session) and
it says what to show, following the rules of the stream (``agent_tools.activities._text_publisher``):

* ``text_delta`` items of a step append text; an item whose offset is behind what was shown appends only
  its new part, one ahead of it (an item missed) appends nothing until the final message;
* ``text_discard`` of a later attempt voids the text shown for the step so far, and later items of an
  earlier attempt are ignored;
* the step's ``assistant_message`` completes the text: its content past what was shown, or the whole
  content after a discard when what was shown is not its beginning.

So a reader that applies the updates in order shows each reply once, whole, however the step was retried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agent_tools._activity_io import ProgressEvent

__all__ = ["LiveText", "TextUpdate"]


@dataclass(frozen=True)
class TextUpdate:
    """``append`` text to the reply being shown; ``discard`` the ``text`` shown so far; ``end`` the reply."""

    action: Literal["append", "discard", "end"]
    session_id: str
    text: str = ""


@dataclass
class _Step:
    position: int
    attempt: int = 1
    shown: str = ""


@dataclass
class LiveText:
    """Per-session reassembly of streamed text."""

    _steps: dict[str, _Step] = field(default_factory=dict)
    _finished: dict[str, set[int]] = field(default_factory=dict)

    def feed(self, event: ProgressEvent) -> list[TextUpdate]:
        """What one progress event changes in the text shown: appends, a restart after a retried step, or none."""
        sid = event.session_id
        data = event.data
        if event.kind == "text_delta":
            return self._delta(sid, data)
        if event.kind == "text_discard":
            step = self._step(sid, data)
            if step is None or _int(data.get("attempt")) <= step.attempt:
                return []
            return self._restart(sid, step, _int(data.get("attempt")))
        if event.kind == "assistant_message":
            return self._complete(sid, str(data.get("content") or ""), data.get("position"))
        return []

    def showing(self, session_id: str) -> str:
        """The text of the session's running step shown so far."""
        step = self._steps.get(session_id)
        return step.shown if step else ""

    def _step(self, sid: str, data: dict[str, object]) -> _Step | None:
        position = _int(data.get("position"), -1)
        if position < 0 or position in self._finished.get(sid, set()):
            return None  # late items of a step that has its final message: nothing to add
        step = self._steps.get(sid)
        if step is None or step.position != position:
            step = self._steps[sid] = _Step(position=position, attempt=_int(data.get("attempt"), 1))
        return step

    def _restart(self, sid: str, step: _Step, attempt: int) -> list[TextUpdate]:
        out = [TextUpdate("discard", sid, step.shown)] if step.shown else []
        step.attempt, step.shown = attempt, ""
        return out

    def _delta(self, sid: str, data: dict[str, object]) -> list[TextUpdate]:
        step = self._step(sid, data)
        if step is None:
            return []
        attempt = _int(data.get("attempt"), 1)
        out: list[TextUpdate] = []
        if attempt < step.attempt:
            return []
        if attempt > step.attempt:
            out = self._restart(sid, step, attempt)
        text = str(data.get("text") or "")
        offset = _int(data.get("offset"), len(step.shown))
        if offset > len(step.shown):
            return out  # a batch went missing: the final message fills the gap
        new = text[len(step.shown) - offset :]
        if new:
            step.shown += new
            out.append(TextUpdate("append", sid, new))
        return out

    def _complete(self, sid: str, content: str, position: object) -> list[TextUpdate]:
        step = self._steps.pop(sid, None)
        if step is not None and position is not None and _int(position, -1) != step.position:
            # The message of another step (an error notice): the running step's partial text is void.
            out = [TextUpdate("discard", sid, step.shown)] if step.shown else []
            return [*out, TextUpdate("append", sid, content), TextUpdate("end", sid)]
        if isinstance(position, int):
            self._finished.setdefault(sid, set()).add(position)
        shown = step.shown if step else ""
        if content.startswith(shown):
            rest = content[len(shown) :]
            return [*([TextUpdate("append", sid, rest)] if rest else []), TextUpdate("end", sid)]
        return [TextUpdate("discard", sid, shown), TextUpdate("append", sid, content), TextUpdate("end", sid)]


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
