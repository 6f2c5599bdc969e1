"""What a worker does not do at start: load httpx's command line, load model providers no session named, or
probe the exec_python sandbox twice. Fast, no server."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_tools.activities._sandbox import isolation

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._settings import Settings
plugin = AgentToolsPlugin(Settings(database_url="sqlite+aiosqlite:////nonexistent/x.sqlite", agents_file=None))
acts = plugin._activities([])
import httpx
watched = ["httpx._main", "pygments", "agent_tools.activities._providers.anthropic",
           "agent_tools.activities._providers.openai_compat", "agent_tools.activities._providers.scripted"]
print(json.dumps({"activities": len(acts), "loaded": [m for m in watched if m in sys.modules],
                  "stub": httpx.main.__module__}))
"""


def test_a_worker_registers_its_activities_without_httpx_cli_or_unused_providers() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["activities"] > 10
    assert found["loaded"] == []
    assert found["stub"] == "httpx"  # httpx's own fallback ``main``, defined when its CLI does not import


def test_httpx_cli_still_imports_when_asked_after() -> None:
    code = (
        "from agent_tools._plugin import _import_httpx_without_its_cli as f; f()\n"
        "import sys; print('httpx._main' in sys.modules)\n"
        "from httpx._main import main; print(main is not None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "True"]


async def test_callers_during_the_sandbox_probe_share_one_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    async def probe(config: isolation.IsolationConfig) -> isolation.Availability:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return isolation.Availability(reason=f"probed {calls}")

    monkeypatch.setattr(isolation, "_probe", probe)
    monkeypatch.setattr(isolation, "_AVAILABILITY", {})
    config = isolation.IsolationConfig(
        bwrap="/nonexistent/bwrap", pythons=(), user=None, library_paths=(), read_only_paths=(), mount_proc=False,
        protected_paths=(), unsafe_run_without_isolation=False,
    )  # fmt: skip
    found = await asyncio.gather(*(isolation.availability(config) for _ in range(3)))
    assert calls == 1
    assert [f.reason for f in found] == ["probed 1"] * 3
    assert (await isolation.availability(config)).reason == "probed 1"
    assert calls == 1 and not isolation._PROBING
