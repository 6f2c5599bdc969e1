"""What ``run``, ``watch``, ``chat`` and ``demo`` show: the model's text as it streams, a status line with a
spinner and the elapsed time for every running model step, tool call and sub-agent, and one readable line
per finished step.

Built on rich (which typer brings). On a terminal the running items and the line being written sit in a
live region at the bottom, finished lines scroll above it; in a pipe or a file the same lines are printed
plainly, without the live region.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from agent_tools._activity_io import ProgressEvent
from agent_tools._catalog.registry import builtin_specs
from agent_tools._live_text import LiveText, TextUpdate
from agent_tools._progress_text import model_label, preview, shorten, step_summary

_SPECS = {s.name: s for s in builtin_specs()}
_OWN_LINES = frozenset({"todoWrite", "subAgent", "spawn_agent", "invoke_sub_agent", "hand_off_to_agent"})
# Past this many characters without a line break, the line being written is printed up to its last word:
# the live region stays a few lines high however long a paragraph grows.
_WRAP_FACTOR = 3


def tool_label(name: str, arguments: Any) -> str:
    """A tool call as the Temporal UI names it (``webSearch: "lisbon food"``), for any tool."""
    spec = _SPECS.get(name)
    args = arguments if isinstance(arguments, dict) else {}
    return spec.summary(args) if spec is not None else name


def elapsed(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


@dataclass
class _Running:
    label: str
    started: float
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))


class LiveConsole:
    """Renders a session tree's progress events; one per followed root."""

    def __init__(self, root_id: str, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=False)
        self.root_id = root_id
        self.text = LiveText()
        self.labels: dict[str, str] = {root_id: ""}
        self.partial: dict[str, str] = {}
        self.running: dict[str, _Running] = {}
        self.replied: set[str] = set()  # sessions whose reply text was shown
        self.models: set[str] = set()
        self._live: Live | None = None

    # ---- the live region ----------------------------------------------------------------------------

    def start(self) -> None:
        if self.console.is_terminal and self._live is None:
            self._live = Live(
                console=self.console,
                get_renderable=self._render,
                refresh_per_second=10,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()

    def close(self) -> None:
        """Print the lines still being written (a Ctrl-C mid-step keeps what was shown), then stop."""
        for sid, partial in list(self.partial.items()):
            if partial:
                self.line(self._label(sid, partial))
        self.partial.clear()
        self.stop()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Without the live region (while a question or the chat prompt reads from the terminal)."""
        was = self._live is not None
        self.stop()
        try:
            yield
        finally:
            if was:
                self.start()

    def _render(self) -> RenderableType:
        now = time.monotonic()
        rows: list[RenderableType] = []
        for sid, partial in self.partial.items():
            if partial:
                rows.append(Text(self._prefix(sid) + partial))
        for item in self.running.values():
            item.spinner.update(text=Text(f"{item.label}  {elapsed(now - item.started)}", style="dim"))
            rows.append(item.spinner)
        return Group(*rows)

    # ---- printing -----------------------------------------------------------------------------------

    def line(self, text: str | Text, style: str | None = None) -> None:
        """A line of text; rich wraps it at word boundaries (never markup: ``[x]`` is a todo, not a tag)."""
        self.console.print(text, style=style, highlight=False, markup=False)

    def status(self, text: str, style: str | None = None) -> None:
        """A status line: one terminal line, shortened at a word boundary to fit."""
        indent = text[: len(text) - len(text.lstrip(" "))]
        self.line(indent + shorten(text, max(20, self.console.width - 1 - len(indent))), style)

    def _prefix(self, sid: str) -> str:
        label = self.labels.get(sid)
        return f"[{label}] " if label else ""

    def _label(self, sid: str, text: str) -> str:
        return self._prefix(sid) + text

    # ---- events -------------------------------------------------------------------------------------

    def handle(self, event: ProgressEvent) -> None:
        """Show one progress event: its live text, then its line or its running item."""
        for update in self.text.feed(event):
            self._text(update)
        on_kind = self._on.get(event.kind)
        if on_kind is not None:
            on_kind(event.session_id, event.data)

    @property
    def _on(self) -> dict[str, Callable[[str, dict[str, Any]], None]]:
        """What each event kind does; kinds not named here show nothing of their own."""
        return {
            "turn_started": self._turn_started,
            "step_started": self._step_started,
            "assistant_message": self._assistant_message,
            "tool_started": self._tool_started,
            "tool_finished": self._tool_finished,
            "todos": self._todos,
            "subagent_started": self._subagent_started,
            "subagent_done": self._subagent_done,
            "goal": self._goal,
            "loop": self._loop,
            "event": self._event,
            "budget": self._budget,
            "question": self._question,
            "answer": self._answer,
            "approval": self._approval,
            "status": self._status_changed,
        }

    def _turn_started(self, sid: str, d: dict[str, Any]) -> None:
        trigger = d.get("trigger")
        self.status(
            self._label(sid, f"── turn {d.get('turn')}" + (f" ({trigger})" if trigger != "user" else "")), "dim"
        )

    def _step_started(self, sid: str, d: dict[str, Any]) -> None:
        model = str(d.get("model") or "")
        self.models.add(model)
        self.running[f"{sid}:step"] = _Running(
            self._label(sid, step_summary(int(d.get("step") or 0), model)), time.monotonic()
        )

    def _assistant_message(self, sid: str, d: dict[str, Any]) -> None:
        self.running.pop(f"{sid}:step", None)

    def _tool_started(self, sid: str, d: dict[str, Any]) -> None:
        self.running.pop(f"{sid}:step", None)  # the step has answered with these calls
        label = self._label(sid, tool_label(str(d.get("tool")), d.get("arguments")))
        self.running[f"{sid}:{d.get('call_id')}"] = _Running(label, time.monotonic())
        if self._live is None and d.get("tool") not in ("subAgent", "spawn_agent", "invoke_sub_agent"):
            self.status(f"  → {label}", "cyan")

    def _tool_finished(self, sid: str, d: dict[str, Any]) -> None:
        item = self.running.pop(f"{sid}:{d.get('call_id')}", None)
        took = f"  {elapsed(time.monotonic() - item.started)}" if item else ""
        label = item.label if item else self._label(sid, str(d.get("tool")))
        mark, style = ("✗", "red") if d.get("is_error") else ("✓", "green")
        head = f"  {mark} {label}{took}"
        # Tools whose outcome has its own lines (the todo list, the sub-agent's) need no preview.
        quiet = d.get("tool") in _OWN_LINES and not d.get("is_error")
        room = self.console.width - 1 - len(head) - 2
        rest = "" if quiet or room < 12 else shorten(str(d.get("preview") or ""), room)
        self.line(Text.assemble((f"  {mark} {label}", style), (took, "dim"), ("  " + rest if rest else "", "")))

    def _todos(self, sid: str, d: dict[str, Any]) -> None:
        for t in d.get("todos") or []:
            mark = {"completed": "[x]", "in_progress": "[~]"}.get(str(t.get("status")), "[ ]")
            self.line(self._label(sid, f"    {mark} {t.get('content')}"), "magenta")

    def _subagent_started(self, sid: str, d: dict[str, Any]) -> None:
        child = str(d.get("id"))
        title = shorten(str(d.get("title") or d.get("role") or child), 40)
        self.labels[child] = title
        self.running[child] = _Running(self._label(sid, f"sub-agent {title}"), time.monotonic())
        self.status(
            self._label(sid, f"  ◆ sub-agent {title} started: {shorten(str(d.get('task') or ''), 90)}"), "yellow"
        )

    def _subagent_done(self, sid: str, d: dict[str, Any]) -> None:
        child = str(d.get("id"))
        item = self.running.pop(child, None)
        took = f" · {elapsed(time.monotonic() - item.started)}" if item else ""
        title = self.labels.get(child, child)
        status = d.get("status") or ("completed" if d.get("ok") else "failed")
        self.status(
            self._label(sid, f"  ◆ sub-agent {title} {status}{took}: {preview(str(d.get('preview') or ''), 90)}"),
            "yellow",
        )

    def _goal(self, sid: str, d: dict[str, Any]) -> None:
        self.status(
            self._label(
                sid, f"  • goal {d.get('goal_id')} {d.get('event')}: {shorten(str(d.get('condition') or ''), 80)}"
            ),
            "yellow",
        )

    def _loop(self, sid: str, d: dict[str, Any]) -> None:
        self.status(
            self._label(sid, f"  • {d.get('loop_id')} {d.get('event')}: {shorten(str(d.get('prompt') or ''), 80)}"),
            "yellow",
        )

    def _event(self, sid: str, d: dict[str, Any]) -> None:
        self.status(self._label(sid, f"  • event {d.get('action')}: {d.get('event_kind')}"), "yellow")

    def _budget(self, sid: str, d: dict[str, Any]) -> None:
        self.status(self._label(sid, f"  ! budget reached: {shorten(str(d.get('reason') or ''), 120)}"), "red")

    def _question(self, sid: str, d: dict[str, Any]) -> None:
        self.running[f"{sid}:question"] = _Running(self._label(sid, "waiting for your answer"), time.monotonic())

    def _answer(self, sid: str, d: dict[str, Any]) -> None:
        self.running.pop(f"{sid}:question", None)

    def _approval(self, sid: str, d: dict[str, Any]) -> None:
        key = f"{sid}:approval:{d.get('approval_id')}"
        if d.get("state") == "pending":
            self.running[key] = _Running(self._label(sid, f"{d.get('tool')} waits for approval"), time.monotonic())
        elif d.get("state") in ("approved", "denied", "timed_out"):
            self.running.pop(key, None)
            by = f" by {d.get('decided_by')}" if d.get("decided_by") else ""
            style = "green" if d.get("state") == "approved" else "red"
            self.status(self._label(sid, f"  • approval of {d.get('tool')}: {d.get('state')}{by}"), style)

    def _status_changed(self, sid: str, d: dict[str, Any]) -> None:
        if d.get("status") in ("completed", "failed", "stopped", "handed_off"):
            for key in [k for k in self.running if k.startswith(f"{sid}:")]:
                self.running.pop(key)

    def _text(self, update: TextUpdate) -> None:
        sid = update.session_id
        partial = self.partial.get(sid, "")
        if update.action == "append":
            partial += update.text
            *done, partial = partial.split("\n")
            for piece in done:
                self.line(self._label(sid, piece))
            width = max(20, self.console.width - len(self._prefix(sid)))
            while len(partial) > width * _WRAP_FACTOR:
                cut = partial.rfind(" ", 0, width * _WRAP_FACTOR)
                cut = cut if cut > width else width * _WRAP_FACTOR
                self.line(self._label(sid, partial[:cut]))
                partial = partial[cut:].lstrip(" ")
            self.partial[sid] = partial
            self.replied.add(sid)
        elif update.action == "discard":
            if update.text and partial.endswith(update.text) and len(update.text) <= len(partial):
                self.partial[sid] = partial[: len(partial) - len(update.text)]
            else:
                # Some of it has scrolled up already: say that it no longer counts.
                self.partial[sid] = ""
                self.line(
                    self._label(sid, "(the model call was retried: the text above is replaced by what follows)"), "dim"
                )
        elif update.action == "end":
            if partial:
                self.line(self._label(sid, partial))
            self.partial.pop(sid, None)

    def scripted_demo(self) -> bool:
        """Whether the session runs on the bundled demo script (no model key anywhere)."""
        return any(model_label(m) == "scripted:demo_script.yaml" for m in self.models)
