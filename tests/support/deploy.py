"""Checking the deployment files (docker-compose.yml, deploy/kubernetes/) against the code, and running
their commands as this machine can: as processes, with no container engine. No tests here."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel
from temporalio.envconfig import ClientConfigProfile

from agent_tools._settings import Settings
from tests.support.polling import eventually

ROOT = Path(__file__).resolve().parents[2]


def setting_exists(var: str) -> bool:
    """Whether ``AGENT_TOOLS_<FIELD>[__<SUBFIELD>]`` names a field of Settings (a legacy one-underscore
    section name such as ``AGENT_TOOLS_WEB_SEARXNG_URL`` does not)."""
    model: Any = Settings
    for part in var.removeprefix("AGENT_TOOLS_").lower().split("__"):
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return False
        model = field.annotation
    return True


def temporal_reads(var: str, value: str) -> bool:
    """Whether Temporal's client configuration (the SDK's envconfig) takes ``var``: set alone, it changes
    the profile it loads."""
    return ClientConfigProfile.load(override_env_vars={var: value}) != ClientConfigProfile.load(override_env_vars={})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def compose_value(value: object) -> str:
    """A compose environment value with ``${NAME:-default}`` read as its default (this machine sets none)."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", str(value))


def start(argv: list[str], env: Mapping[str, str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    """A container's command as a process: ``agent-tools ...`` is this checkout's CLI."""
    if argv[0] == "agent-tools":
        argv = [sys.executable, "-m", "agent_tools._cli", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_TOOLS_", "TEMPORAL_"))}
    with log.open("w") as out:
        return subprocess.Popen(argv, env={**base, **env}, cwd=cwd, stdout=out, stderr=out)


async def answers(proc: subprocess.Popen[bytes], log: Path, url: str, *, timeout: float = 60) -> httpx.Response:
    """The first 200 from ``url`` while ``proc`` runs."""
    async with httpx.AsyncClient() as http:

        async def get() -> httpx.Response:
            assert proc.poll() is None, log.read_text()[-3000:]
            return await http.get(url)

        return await eventually(
            get, until=lambda r: r.status_code == 200, timeout=timeout, ignoring=(httpx.TransportError,), what=url
        )


async def stop(proc: subprocess.Popen[bytes]) -> int:
    proc.terminate()
    return await asyncio.to_thread(proc.wait, 60)
