"""Helpers of the exec_python tests: a real sandbox engine (skipped, or failed under CI, when this machine has
none), attempts reported as JSON from inside the sandbox, and the host's view of the processes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_tools.activities._sandbox.engine import SandboxEngine
from agent_tools.contracts._sandbox import ExecPythonArgs, ExecPythonResult, SandboxSettings

ROOT = os.geteuid() == 0
# .ci/run sets it: there the sandbox must work, and its tests must not skip.
REQUIRE_SANDBOX = os.environ.get("AGENT_TOOLS_REQUIRE_SANDBOX") == "1"
REPO = Path(__file__).resolve().parents[2]

# Code prepended to an escape attempt: `attempt(label, fn)` records what fn returned or raised, and the
# script ends by printing every record as one JSON line.
PRELUDE = """\
import json, os, socket, sys
results = {}
def attempt(label, fn):
    try:
        results[label] = "ok: " + repr(fn())[:300]
    except BaseException as exc:
        results[label] = type(exc).__name__ + ": " + str(exc)[:300]
"""
EPILOGUE = "\nprint(json.dumps(results))\n"


async def sandbox_engine(**overrides: Any) -> SandboxEngine:
    """An engine whose sandbox works on this machine; the test skips (fails under CI) when there is none."""
    engine = SandboxEngine(SandboxSettings(**overrides))
    found = await engine.availability()
    if found.sandbox is None:
        message = f"no working bubblewrap sandbox here: {found.reason}"
        if REQUIRE_SANDBOX:
            pytest.fail(message)
        pytest.skip(message)
    return engine


async def run(engine: SandboxEngine, code: str, **kwargs: Any) -> ExecPythonResult:
    return await engine.run(ExecPythonArgs(code=code, **kwargs))


async def attempts(engine: SandboxEngine, body: str, **kwargs: Any) -> tuple[dict[str, str], ExecPythonResult]:
    """Run PRELUDE + body + EPILOGUE and return the recorded attempts (and the whole result)."""
    r = await run(engine, PRELUDE + body + EPILOGUE, **kwargs)
    assert r.ok, (r.error, r.error_message, r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1]), r


def processes_with(token: str) -> list[int]:
    """PIDs (in the host's numbering) of the processes whose command line holds ``token``."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline:
                found.append(int(entry))
    return found


def world_readable_dir() -> Iterator[Path]:
    """A fresh directory anyone may read (pytest's tmp_path sits under a 0700 parent, which would prove
    nothing, and bwrap, run as the sandbox account, must reach the paths it binds), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="sandbox-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
