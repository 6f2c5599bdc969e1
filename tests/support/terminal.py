"""A real terminal for CLI tests: the command runs in tmux (its own server per test), the test reads the
screen with capture-pane and types with send-keys."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._settings import Settings
from tests.support.polling import eventually


class Terminal:
    def __init__(self, cwd: Path, width: int = 120, height: int = 40) -> None:
        if shutil.which("tmux") is None:
            reason = "tmux is not installed (.ci/run installs Debian's tmux)"
            if os.environ.get("CI"):
                pytest.fail(reason)
            pytest.skip(reason)
        self.socket = f"agent-tools-test-{uuid.uuid4().hex[:10]}"
        self.cwd = cwd
        self.width, self.height = width, height

    def _tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20)
        return done.stdout

    def start(self, args: list[str], env: dict[str, str]) -> None:
        """``agent-tools ARGS`` in a fresh terminal; the pane stays open after the command exits."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "agent_tools._cli", *args])
        script = f"cd {shlex.quote(str(self.cwd))} && env {exports} {command}; echo EXIT=$?; sleep 600"
        self._tmux("new-session", "-d", "-x", str(self.width), "-y", str(self.height), "bash", "-c", script)

    def screen(self) -> str:
        """What the terminal shows now, scrollback included."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-500")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    async def wait_for(self, check: Callable[[str], Any], timeout: float = 60.0) -> str:
        """The screen once ``check`` holds for it, with runs of whitespace as one space (rich wraps long
        lines at word boundaries, so a phrase may span two screen lines)."""

        async def text() -> str:
            return " ".join(self.screen().split())

        return await eventually(text, until=check, timeout=timeout, what="the screen to match")

    def close(self) -> None:
        self._tmux("kill-server")


def cli_env(temporal_env: WorkflowEnvironment, settings: Settings) -> dict[str, str]:
    env = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_TASK_QUEUE": settings.task_queue,
        "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        "AGENT_TOOLS_AGENTS_FILE": "",
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
        "TERM": "xterm-256color",
    }
    if settings.model:
        env["AGENT_TOOLS_MODEL"] = settings.model
    if settings.providers:
        env["AGENT_TOOLS_PROVIDERS"] = json.dumps({k: v.model_dump() for k, v in settings.providers.items()})
    return env
