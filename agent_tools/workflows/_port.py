"""What a capability part of the session may reach: the port, the part's base, and its handler table.

A part (human, planning, delegation, events, approvals, budget, structured output) owns its slice of
``SessionState`` and sees the workflow only through :class:`SessionPort`; ``AgentSession`` implements the
port, keeps the loop and the Temporal plumbing, and registers every part's tools, resume handlers,
signals, updates and queries. A part can therefore run against a fake port, without a workflow.
"""

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from temporalio import workflow

from agent_tools._activity_io import SessionRef
from agent_tools._messages import ToolCall
from agent_tools._session import (
    ParkedCall,
    SessionConfig,
    SessionInput,
    SessionResult,
    SessionState,
    SessionStatus,
    Trigger,
)
from agent_tools._session_start import SessionStart
from agent_tools.workflows._native import NativeHandler, ResumeHandler

R = TypeVar("R")


class ChildHandle(Protocol):
    """The part of a started child workflow's handle the delegation part uses."""

    def done(self) -> bool: ...

    def result(self) -> SessionResult: ...


class SessionPort(Protocol):
    """The session as its parts see it: state, config, clock, progress, waits and calls out.

    Every call that issues a Temporal command goes through here, so the commands a part issues are the
    session's own, in the order the part asks for them.
    """

    state: SessionState

    @property
    def config(self) -> SessionConfig:
        """The resolved config (set before any tool, turn hook or handler after prepare needs it)."""
        ...

    @property
    def prepared(self) -> bool:
        """Whether the config is resolved (a signal in the first activation comes before it)."""
        ...

    @property
    def stopping(self) -> bool:
        """Whether the session has been told to stop."""
        ...

    def patched(self, patch_id: str) -> bool:
        """``workflow.patched``: where a capability asks the patch id of a change made after 1.0.0."""
        ...

    def now(self) -> datetime:
        """The workflow's deterministic clock."""
        ...

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        """The workflow's logger (quiet during replay)."""
        ...

    def uuid4(self) -> str:
        """A deterministic random UUID (``workflow.uuid4()``) as text."""
        ...

    def publish(self, kind: str, **data: object) -> None:
        """A live progress event on the ``progress`` topic."""
        ...

    def set_status(self, status: SessionStatus) -> None:
        """The session's status (progress event, search attribute, details)."""
        ...

    def refresh_details(self) -> None:
        """Rewrite the Temporal UI's current details from every part's sections."""
        ...

    def session_ref(self) -> SessionRef:
        """Who is calling, for an activity's input."""
        ...

    def parked_call(self, call: ToolCall, kind: str, ref: str) -> ParkedCall | None:
        """The parked-wait record of ``call`` in the step in progress (None outside one)."""
        ...

    async def parked_wait(
        self,
        parked: ParkedCall | None,
        done: Callable[[], bool],
        timeout: float | timedelta | None = None,
        *,
        summary: str | None = None,
    ) -> None:
        """Wait for ``done`` (ends early on a stop; the run may continue-as-new meanwhile when parked)."""
        ...

    async def wait_condition(
        self, done: Callable[[], bool], timeout: float | timedelta | None = None, *, summary: str | None = None
    ) -> None:
        """``workflow.wait_condition``: no stop check, ``TimeoutError`` on timeout."""
        ...

    async def execute_activity(
        self,
        activity: str,
        arg: Any,
        *,
        result_type: type[R] | None,
        summary: str | None,
        options: Mapping[str, Any],
        local: bool = False,
    ) -> R:
        """Run an activity (a local one with ``local``) with ``options`` (timeouts, retry policy); its result
        decoded as ``result_type`` (None: an activity that returns nothing)."""
        ...

    async def start_child(self, session: SessionInput, start: SessionStart) -> ChildHandle:
        """Start a child session, abandoned on this run's close (continue-as-new must not end it)."""
        ...

    async def signal_external(self, workflow_id: str, signal: str, arg: Any) -> None:
        """Signal another workflow (raises when it is closed or unknown)."""
        ...


class CapabilityPart:
    """A capability of the session: its slice of state, its native tools, its handlers and its hooks.

    Hooks run in the order the session lists its parts (``on_stop`` in the reverse order).
    """

    # The signals, updates and queries this part answers (registered on ``AgentSession`` by name).
    HANDLERS: ClassVar[Sequence["Handler"]] = ()

    def __init__(self, port: SessionPort) -> None:
        self.port = port

    @property
    def state(self) -> SessionState:
        return self.port.state

    @property
    def config(self) -> SessionConfig:
        return self.port.config

    def now_iso(self) -> str:
        return self.port.now().isoformat()

    def touch(self) -> None:
        self.state.updated_at = self.now_iso()

    def enqueue(self, trigger: Trigger) -> None:
        """Queue a turn."""
        self.state.inbox.append(trigger)
        self.touch()

    def native_tools(self) -> dict[str, NativeHandler]:
        """The workflow-native tools this part handles, by tool name."""
        return {}

    def resume_handlers(self) -> dict[str, ResumeHandler]:
        """The parked waits this part resumes, by :attr:`ParkedCall.kind`."""
        return {}

    def on_start(self) -> None:
        """Once per run, after the config is known (start background timers here)."""

    async def after_turn(self, trigger: Trigger) -> None:
        """After every completed turn."""

    def pending_work(self) -> list[str]:
        """Reasons the session must not finish yet."""
        return []

    async def on_stop(self, reason: str) -> None:
        """When the session stops or is cancelled."""

    def details_sections(self) -> list[str]:
        """Markdown sections for the Temporal UI's current details."""
        return []


P = TypeVar("P", bound=CapabilityPart)


@dataclass(frozen=True)
class Handler:
    """One signal, update or query of a part: its wire name and the part's method that answers it."""

    kind: Literal["signal", "update", "query"]
    name: str
    fn: Callable[..., Any]
    validator: Callable[..., None] | None = None


def signal(name: str, fn: Callable[..., None]) -> Handler:
    """The signal ``name``, handled by the part's method ``fn`` (which records what it cannot take)."""
    return Handler("signal", name, fn)


def update(name: str, fn: Callable[..., Any], validator: Callable[..., None]) -> Handler:
    """The update ``name``: ``validator`` refuses before history, ``fn`` changes the state and answers."""
    return Handler("update", name, fn, validator)


def query(name: str, fn: Callable[..., Any]) -> Handler:
    """The query ``name``, read by the part's method ``fn``."""
    return Handler("query", name, fn)


class HasParts(Protocol):
    def part(self, cls: type[P]) -> P: ...


def _routed(cls: type, part: type[CapabilityPart], fn: Callable[..., Any]) -> Callable[..., Any]:
    """A method of the workflow class that hands its call to ``fn`` of the instance's ``part``.

    It carries ``fn``'s signature and type hints (``__wrapped__``), which the SDK decodes the payload by.
    """

    def routed(self: HasParts, *args: Any) -> Any:
        return fn(self.part(part), *args)

    functools.update_wrapper(routed, fn)
    routed.__name__ = f"{part.__name__}_{fn.__name__}".lower()
    routed.__qualname__ = f"{cls.__qualname__}.{routed.__name__}"
    routed.__module__ = cls.__module__
    return routed


def part_handlers(*parts: type[CapabilityPart]) -> Callable[[type[R]], type[R]]:
    """Class decorator (under ``@workflow.defn``): the parts' handlers as the workflow's own.

    Registered on the class, as if written there with ``@workflow.signal`` and the like, and not at run
    time: the SDK only routes an update (and applies a signal in order) in a workflow's first activation
    to a handler the class declares.
    """

    def install(cls: type[R]) -> type[R]:
        for part in parts:
            for h in part.HANDLERS:
                method = _routed(cls, part, h.fn)
                if h.kind == "signal":
                    setattr(cls, method.__name__, workflow.signal(name=h.name)(method))
                elif h.kind == "query":
                    setattr(cls, method.__name__, workflow.query(name=h.name)(method))
                else:
                    assert h.validator is not None
                    handler = workflow.update(name=h.name)(method)
                    validator = _routed(cls, part, h.validator)
                    handler.validator(validator)
                    setattr(cls, method.__name__, handler)
        return cls

    return install
