"""Every workflow type the worker and the Replayer register."""

from __future__ import annotations

import importlib

# (module, class) of each workflow type; capability issues add theirs here.
WORKFLOW_CLASSES: tuple[tuple[str, str], ...] = (
    ("workflows.session", "AgentSession"),
    ("workflows.event_router", "EventRouter"),
    ("workflows.research", "DeepResearch"),
)


def all_workflows() -> list[type]:
    found: list[type] = []
    for module_name, cls in WORKFLOW_CLASSES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        found.append(getattr(module, cls))
    return found
