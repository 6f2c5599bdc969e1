"""The types of the fixtures in ``tests/conftest.py`` that are not a library's own type."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from agent_tools._agents import AgentDefinition
from agent_tools._client import AgentToolsClient
from agent_tools._settings import Settings

# ``script([...turns])``: writes a scripted-model script and returns its model spec.
Script = Callable[[list[Any]], str]


class WorkerFor(Protocol):
    """``async with worker_for(tools=[...], agents=[...]) as client:`` a worker on the shared dev server."""

    def __call__(
        self,
        *,
        settings: Settings = ...,
        tools: Sequence[Any] = ...,
        agents: Sequence[AgentDefinition] | None = ...,
        **worker_kwargs: Any,
    ) -> AbstractAsyncContextManager[AgentToolsClient]: ...
