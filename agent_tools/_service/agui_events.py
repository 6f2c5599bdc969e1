"""A session's progress items as AG-UI events. Pure: no server, no Temporal.

One :class:`AguiMapper` per run. Feed it every item of the session tree in order; it returns the AG-UI
events the item makes, and says when the run is over for now (``waiting`` names the frontend tool calls a
person must answer):

* the root's ``text_delta`` / ``text_discard`` / ``assistant_message`` -> ``TEXT_MESSAGE_START/CONTENT/END``
  through :class:`agent_tools._live_text.LiveText` (so a retried step's text is not shown twice); a discard
  ends the message and sends ``CUSTOM`` ``agent_tools.text_discard`` naming it;
* the root's ``tool_started`` / ``tool_finished`` -> ``TOOL_CALL_START/ARGS/END`` and ``TOOL_CALL_RESULT``;
* ``question`` -> the frontend tool call ``askUser`` (its arguments the askUser schema's), and waiting;
* ``approval`` pending -> the frontend tool call ``approveToolCall``, and waiting; both from the root or
  any sub-agent, a sub-agent's call id naming it (:func:`agent_tools._service.tree_pending.call_id`);
* ``todos``, ``goal`` and sub-agents' start and end -> ``STATE_DELTA`` (JSON Patch) of the run's state;
* ``status`` idle (a chat waiting for its next message) -> waiting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    StateDeltaEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agent_tools._activity_io import ProgressEvent
from agent_tools._live_text import LiveText
from agent_tools._service.tree_pending import call_id

__all__ = ["APPROVE_TOOL_CALL", "ASK_USER", "AguiMapper", "initial_state"]

ASK_USER = "askUser"
APPROVE_TOOL_CALL = "approveToolCall"
TEXT_DISCARD = "agent_tools.text_discard"
# Calls the engine runs itself whose AG-UI face is a frontend tool call (or nothing).
_HIDDEN_TOOLS = frozenset({ASK_USER})


def initial_state(todos: list[Any] | None = None) -> dict[str, Any]:
    """The state a run starts from: the session's todo list, its goal, its sub-agents, and the cursor."""
    return {"todos": list(todos or []), "goal": None, "subagents": {}, "cursor": None}


def _patch(path: str, value: Any) -> dict[str, Any]:
    # JSON Patch "add" replaces an object member that is there already.
    return {"op": "add", "path": path, "value": value}


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass
class AguiMapper:
    """The events of one run, item by item."""

    root: str
    live: LiveText = field(default_factory=LiveText)
    message_id: str | None = None
    waiting: list[str] = field(default_factory=list)
    # Events made outside feed (the calls a run re-shows when it answers none of them).
    events: list[BaseEvent] = field(default_factory=list)

    def feed(self, event: ProgressEvent, offset: int) -> list[BaseEvent]:
        """The AG-UI events of the item at ``offset`` of ``event.session_id``'s stream."""
        kind, data = event.kind, event.data
        if kind in ("subagent_started", "subagent_done"):
            return self._subagent(event)
        if kind == "question" or (kind == "approval" and data.get("state") == "pending"):
            return self._for_a_person(event, offset)
        if event.session_id != self.root:
            return []  # a sub-agent's other items show only as its entry in the state
        if kind in ("text_delta", "text_discard", "assistant_message"):
            return self._text(event, offset)
        if kind == "tool_started" and str(data.get("tool")) not in _HIDDEN_TOOLS:
            return self._tool_call(
                str(data.get("call_id") or f"call-{offset}"), str(data.get("tool")), data.get("arguments")
            )
        if kind == "tool_finished" and str(data.get("tool")) not in _HIDDEN_TOOLS:
            tool_call = str(data.get("call_id") or f"call-{offset}")
            content = str(data.get("preview") or "")
            return [ToolCallResultEvent(message_id=f"result-{tool_call}", tool_call_id=tool_call, content=content)]
        if kind == "todos":
            return [StateDeltaEvent(delta=[_patch("/todos", data.get("todos") or [])])]
        if kind == "goal":
            return [StateDeltaEvent(delta=[_patch("/goal", data)])]
        if kind == "status" and data.get("status") == "idle":
            self.waiting.append("message")
            return self._end_text()
        return []

    def _for_a_person(self, event: ProgressEvent, offset: int) -> list[BaseEvent]:
        """A question or a pending approval of any session in the tree, as the frontend call that names it."""
        data = event.data
        if event.kind == "question":
            ask_id = str(data.get("ask_id") or f"ask-{offset}")
            call = call_id(self.root, event.session_id, ask_id)
            return self.frontend_call(call, ASK_USER, {"questions": data.get("questions") or []})
        approval_id = str(data.get("approval_id") or f"approval-{offset}")
        arguments = {k: data.get(k) for k in ("approval_id", "tool", "arguments", "digest", "deadline")}
        call = call_id(self.root, event.session_id, approval_id)
        return self.frontend_call(call, APPROVE_TOOL_CALL, {**arguments, "session_id": event.session_id})

    def finish(self, cursor: str | None) -> list[BaseEvent]:
        """What closes the run: an open message ended, and the cursor the next run goes on from."""
        return [*self._end_text(), StateDeltaEvent(delta=[_patch("/cursor", cursor)])]

    @property
    def pending_calls(self) -> list[str]:
        """The frontend tool calls the run leaves for a person."""
        return [w for w in self.waiting if w != "message"]

    def _text(self, event: ProgressEvent, offset: int) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        for update in self.live.feed(event):
            if update.action == "append" and update.text:
                if self.message_id is None:
                    self.message_id = f"msg-{offset}"
                    out.append(TextMessageStartEvent(message_id=self.message_id, role="assistant"))
                out.append(TextMessageContentEvent(message_id=self.message_id, delta=update.text))
            elif update.action == "discard" and self.message_id is not None:
                voided = self.message_id
                out.extend(self._end_text())
                out.append(CustomEvent(name=TEXT_DISCARD, value={"messageId": voided, "text": update.text}))
            elif update.action == "end":
                out.extend(self._end_text())
        return out

    def _end_text(self) -> list[BaseEvent]:
        if self.message_id is None:
            return []
        ended, self.message_id = self.message_id, None
        return [TextMessageEndEvent(message_id=ended)]

    def frontend_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> list[BaseEvent]:
        """A call a person answers (``askUser``, ``approveToolCall``): its events, and the run waits on it."""
        self.waiting.append(call_id)
        return [*self._end_text(), *self._tool_call(call_id, name, arguments)]

    def _tool_call(self, call_id: str, name: str, arguments: Any) -> list[BaseEvent]:
        args = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False, default=str)
        return [
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name, parent_message_id=self.message_id),
            ToolCallArgsEvent(tool_call_id=call_id, delta=args),
            ToolCallEndEvent(tool_call_id=call_id),
        ]

    def _subagent(self, event: ProgressEvent) -> list[BaseEvent]:
        """A parent's ``subagent_started`` / ``subagent_done``: the child's entry in ``subagents``."""
        child = event.data.get("id")
        if not isinstance(child, str):
            return []
        path = f"/subagents/{_pointer(child)}"
        if event.kind == "subagent_started":
            entry = {"title": event.data.get("title"), "task": event.data.get("task"), "status": "running"}
            return [StateDeltaEvent(delta=[_patch(path, entry)])]
        if event.kind == "subagent_done":
            status = str(event.data.get("status") or "done")
            entry = {"role": event.data.get("role"), "status": status, "preview": event.data.get("preview")}
            return [StateDeltaEvent(delta=[_patch(path, entry)])]
        return []
