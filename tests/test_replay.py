"""Committed histories of every workflow type replay against the current code (determinism on upgrade)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
from tests.record_histories import HISTORIES, RELEASED, lookup

# Every release's recorded sessions, from 1.0.0 on.
FILES = sorted(HISTORIES.glob("*/*.json"))


def _workflow_type(path: Path) -> str:
    first = json.loads(path.read_text())["events"][0]
    return str(first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"])


def test_histories_are_committed() -> None:
    """The long-lived workflow types have committed histories of the first release in every state a session
    waits in (DeepResearch, a job that ends in minutes, is replayed from a fresh history in
    tests/test_web_research.py)."""
    released = sorted(RELEASED.glob("*.json"))
    types = {_workflow_type(f) for f in released}
    assert {"AgentSession", "EventRouter"} <= types, f"record them: python -m tests.record_histories ({types})"
    names = {f.name.split(".")[0] for f in released}
    for scenario in (
        "session_ask_user",
        "session_subagent_and_goal",
        "session_event_wait",
        "session_chat_continue_as_new",
        "session_streamed_text",
        "session_structured_output",
        "session_loop_timer",
        "session_budget_reached",
        "session_tool_approval",
        "session_ask_user_mid_wait",
        "session_event_wait_mid_wait",
        "session_subagent_mid_wait",
        "session_tool_approval_mid_wait",
    ):
        assert scenario in names, scenario


@pytest.mark.parametrize("path", FILES, ids=[f"{f.parent.name}/{f.name}" for f in FILES])
async def test_replay(path: Path) -> None:
    plugin = AgentToolsPlugin(Settings(agents_file=None), tools=[lookup])
    replayer = Replayer(workflows=[], plugins=[plugin])
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    await replayer.replay_workflow(history)
