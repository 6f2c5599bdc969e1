"""How every command runs its coroutine: a refusal, an unreachable server or a closed terminal is a clear
message and exit status 1, not a traceback; Ctrl-C ends quietly with status 130 (the command said what
goes on without it)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import typer
from temporalio.client import WorkflowFailureError

from agent_tools._errors import AgentToolsError
from agent_tools._settings import Settings

T = TypeVar("T")

# The embedded mode's logs: the worker's and the Temporal core's, which would otherwise interleave with the
# conversation on the terminal.
LOG_DIR = Path(".agent-tools") / "logs"


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
