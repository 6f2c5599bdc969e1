"""Every workflow type the worker and the Replayer register."""

from __future__ import annotations

from agent_tools.modules import present_modules

# (module, class) of each workflow type; capability issues add theirs here.
WORKFLOW_CLASSES: tuple[tuple[str, str], ...] = (
    ("agent_tools.workflows.session", "AgentSession"),
    ("agent_tools.workflows.event_router", "EventRouter"),
    ("agent_tools.workflows.research", "DeepResearch"),
)


def all_workflows() -> list[type]:
    classes = dict(WORKFLOW_CLASSES)
    return [getattr(module, classes[module.__name__]) for module in present_modules(classes)]
