"""Committed histories of every workflow type replay against the current code (determinism on upgrade)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from agent_tools.plugin import AgentToolsPlugin
from agent_tools.settings import Settings
from tests.record_histories import HISTORIES, lookup

FILES = sorted(HISTORIES.glob("*.json"))


def test_histories_are_committed() -> None:
    prefixes = {f.name.split(".")[0] for f in FILES}
    assert any(p.startswith("session_") for p in prefixes), (
        "record AgentSession histories: python -m tests.record_histories"
    )


@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
async def test_replay(path: Path) -> None:
    plugin = AgentToolsPlugin(Settings(agents_file=None), tools=[lookup])
    replayer = Replayer(workflows=[], plugins=[plugin])
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await replayer.replay_workflow(history)
