"""The typed registry of workflow-native tools: orchestration that runs inside the session, not as an activity.

Each capability part declares its tools as bound handlers (:meth:`CapabilityPart.native_tools`) and the
parked waits it resumes (:meth:`CapabilityPart.resume_handlers`); the session merges them here.
"""

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from agent_tools._activity_io import ToolCallOutput
from agent_tools._messages import ToolCall
from agent_tools._session import ParkedCall

# A workflow-native tool: its validated arguments and the call -> the result the model gets.
NativeHandler = Callable[[Any, ToolCall], Awaitable[ToolCallOutput]]
# The resumption of a call a previous run handed over while it waited (continue-as-new mid-wait).
ResumeHandler = Callable[[ParkedCall, ToolCall], Awaitable[ToolCallOutput]]


H = TypeVar("H")


def merged(tables: Iterable[Mapping[str, H]], what: str) -> dict[str, H]:
    """One registry from the parts' tables; a name two parts claim is a bug caught at start."""
    out: dict[str, H] = {}
    for table in tables:
        for name, handler in table.items():
            if name in out:
                raise RuntimeError(f"two capability parts handle the {what} {name!r}")
            out[name] = handler
    return out
