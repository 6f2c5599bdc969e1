"""Every workflow type the worker and the Replayer register."""

from __future__ import annotations


def all_workflows() -> list[type]:
    # Imported when a worker is built, not with this module: a client that imports the registry's package
    # does not load the workflow code.
    from agent_tools.workflows._event_router import EventRouter
    from agent_tools.workflows._research import DeepResearch
    from agent_tools.workflows._session import AgentSession

    return [AgentSession, EventRouter, DeepResearch]
