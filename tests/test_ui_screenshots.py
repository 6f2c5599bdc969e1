"""The Temporal UI reads like an agent console: screenshots from headless Chromium (Debian's) of the
workflow list, a session's metadata and its timeline, checked for the names the engine gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import ui_screens


async def test_list_session_and_timeline_name_everything(tmp_path: Path) -> None:
    missing = ui_screens.available()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    shots = await ui_screens.capture(tmp_path)
    assert all(p.stat().st_size > 20_000 for p in shots.files.values())  # real pictures, not blank pages
    # The list names sessions (title, agent, state, depth of the sub-agent), not only by their ids.
    listed = shots.texts["list"]
    assert "Lisbon trip" in listed and "Food research" in listed and "idle" in listed
    # The session's page: static summary and details, the current details with the native tools' trace.
    page = shots.texts["session"]
    assert "assistant: Lisbon trip" in page
    assert "Plan a three-day trip to Lisbon and watch the ticket prices" in page
    assert "Workflow tools (latest)" in page
    for tool in ("todoWrite", "createLoop", "wait_for_event", "askUser", "subAgent"):
        assert tool in page.split("Workflow tools (latest)", 1)[1], tool
    # The timeline: model steps, timers and the sub-agent under their summaries.
    timeline = shots.texts["timeline"]
    for name in (
        "model step 1 · scripted:script.json",
        "model step 3 · scripted:script.json",
        "loop-1 tick",
        "wait_for_event github.check_suite",
        "askUser timeout",
        "sub-agent · assistant: Food research",  # the child under its role, agent and task
        "subscribe github.check_suite",
    ):
        assert name in timeline, name
