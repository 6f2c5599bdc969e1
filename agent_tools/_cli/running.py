"""How every command runs its coroutine: a refusal, an unreachable server or a closed terminal is a clear
message and exit status 1, not a traceback; Ctrl-C ends quietly with status 130 (the command said what
goes on without it)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import typer
from temporalio.client import WorkflowFailureError

from agent_tools._errors import AgentToolsError
from agent_tools._settings import Settings

T = TypeVar("T")
U = TypeVar("U")

# The embedded mode's logs: the worker's and the Temporal core's, which would otherwise interleave with the
# conversation on the terminal.
LOG_DIR = Path(".agent-tools") / "logs"


@dataclass(frozen=True)
class Interrupted(Generic[U]):
    """What came first instead of the awaited value (:func:`unless`)."""

    value: U


async def unless(wanted: Coroutine[Any, Any, T], interrupt: Coroutine[Any, Any, U]) -> T | Interrupted[U]:
    """``wanted``'s value, or :class:`Interrupted` with ``interrupt``'s if that ends first; the other one is
    cancelled (a terminal read in flight stays with the reader for the next prompt)."""
    first = asyncio.ensure_future(wanted)
    second = asyncio.ensure_future(interrupt)
    try:
        await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (first, second):
            if not task.done():
                task.cancel()
    if first.done() and not first.cancelled():
        return first.result()
    return Interrupted(second.result())


def failure_reason(exc: BaseException) -> str:
    """The message at the end of an error's cause chain (a workflow's failure wraps its activity's)."""
    while isinstance(cause := getattr(exc, "cause", None) or exc.__cause__, BaseException):
        exc = cause
    message = getattr(exc, "message", None) or str(exc)
    return str(message).splitlines()[0] if message else type(exc).__name__


def log_file() -> Path:
    return LOG_DIR / "worker.log"


def other_terminals(settings: Settings) -> str:
    """The line that points commands in other terminals at this embedded server."""
    return (
        "in other terminals: export "
        f"AGENT_TOOLS_TEMPORAL_ADDRESS={settings.temporal_address} "
        f"AGENT_TOOLS_TEMPORAL_UI_URL={settings.temporal_ui_url}"
    )


def run_or_explain(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except AgentToolsError as exc:
        typer.secho(str(exc), fg="red", err=True)
        raise typer.Exit(1) from exc
    except WorkflowFailureError as exc:
        # A session the worker refused to start (an unknown agent, a model it cannot serve): its reason.
        typer.secho(f"session failed: {failure_reason(exc)}", fg="red", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt as exc:
        # Without this, click prints "Aborted!" after the command's own word on what goes on.
        raise typer.Exit(130) from exc
