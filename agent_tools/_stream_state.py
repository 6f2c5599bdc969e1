"""Conversion of the progress stream's state for continue-as-new.

Kept out of the workflow module: building a pydantic TypeAdapter for this dataclass evaluates its string
annotations, which would otherwise run again on every workflow run as the sandbox re-imports the module.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from temporalio.contrib.workflow_streams import WorkflowStreamState

_ADAPTER: TypeAdapter[WorkflowStreamState] = TypeAdapter(WorkflowStreamState)


def load_stream_state(data: Any) -> WorkflowStreamState | None:
    return _ADAPTER.validate_python(data) if data else None


def dump_stream_state(state: WorkflowStreamState) -> Any:
    return _ADAPTER.dump_python(state, mode="json")
