"""How every command runs its coroutine: a refusal, an unreachable server or a closed terminal is a clear
message and exit status 1, not a traceback."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import typer

from agent_tools.errors import AgentToolsError

T = TypeVar("T")


def run_or_explain(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except AgentToolsError as exc:
        typer.secho(str(exc), fg="red", err=True)
        raise typer.Exit(1) from exc
