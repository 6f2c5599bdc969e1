"""``exec_python``'s engine: runs a call's code in the sandbox this worker found, and reads how it ended.

The sandbox itself is :mod:`.isolation`, the program that runs inside it :mod:`.launcher`; the tool the
model calls is :mod:`.tool`. Each call gets a fresh workspace, gone afterwards: calls are independent, so a
retried activity on another worker gives the same answer (no per-session state on one worker's disk).
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import make_url

from agent_tools._settings import Settings
from agent_tools.activities._sandbox.isolation import (
    Availability,
    IsolationConfig,
    Sandbox,
    Unisolated,
    availability,
    default_library_paths,
    execute,
    failure_detail,
)
from agent_tools.activities._sandbox.runner import Outcome
from agent_tools.contracts._sandbox import (
    ExecError,
    ExecPythonArgs,
    ExecPythonResult,
    Isolation,
    SandboxFile,
    SandboxLimits,
    SandboxSettings,
)

TOOL_NAME = "exec_python"
UNSAFE_SETTING = "AGENT_TOOLS_SANDBOX__UNSAFE_RUN_WITHOUT_ISOLATION"
# The errors the launcher reports itself (the others are the worker's reading of how the code ended).
_REPORTED_ERRORS: dict[str, ExecError] = {
    "syntax_error": "syntax_error",
    "exception": "exception",
    "memory_limit": "memory_limit",
    "sandbox_error": "sandbox_error",
}


def isolation_config(settings: SandboxSettings, protected_paths: tuple[str, ...] = ()) -> IsolationConfig:
    """The bubblewrap configuration these settings describe."""
    libraries = default_library_paths() if settings.library_paths is None else tuple(settings.library_paths)
    return IsolationConfig(
        bwrap=settings.bwrap,
        pythons=(settings.python, *settings.python_fallbacks),
        user=settings.user,
        library_paths=libraries,
        read_only_paths=tuple(settings.read_only_paths),
        mount_proc=settings.mount_proc,
        protected_paths=protected_paths,
        unsafe_run_without_isolation=settings.unsafe_run_without_isolation,
    )


def protected_paths(settings: Settings) -> tuple[str, ...]:
    """What no bind may contain: a SQLite store (every session's transcript), ``.env`` (API keys) and the
    worker's own tree (its working directory)."""
    paths: list[str] = []
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        db = Path(url.database).resolve()
        paths += [str(db), *(f"{db}{suffix}" for suffix in ("-wal", "-shm", "-journal"))]
    cwd = Path.cwd().resolve()
    paths += [str(cwd / ".env"), str(cwd)]
    return tuple(paths)


@dataclass
class SandboxEngine:
    """Runs code for one worker: its settings, and the sandbox found for them (probed once per process)."""

    settings: SandboxSettings = field(default_factory=SandboxSettings)
    protected: tuple[str, ...] = ()

    async def availability(self) -> Availability:
        return await availability(isolation_config(self.settings, self.protected))

    async def run(self, args: ExecPythonArgs) -> ExecPythonResult:
        """Run ``args.code``; every failure of the code (or of the sandbox) is a result, never raised."""
        started = time.monotonic()
        found = await self.availability()
        plan: Sandbox | Unisolated | None = found.sandbox or found.unisolated
        if plan is None:
            return _failed(f"{TOOL_NAME} is not available on this worker: {found.reason}", started)
        limits = self.settings.limits
        try:
            outcome = await execute(
                plan, code=args.code, files=args.files, timeout_seconds=args.timeout_seconds, limits=limits
            )
        except OSError as exc:
            return _failed(f"could not start the sandbox: {exc}", started)
        return _result(outcome, plan, args, limits, started)


def _isolation(plan: Sandbox | Unisolated) -> Isolation:
    if isinstance(plan, Sandbox):
        return Isolation(
            mode="bubblewrap",
            network="none",
            filesystem="minimal_root",
            pid_namespace=True,
            proc="own" if plan.mount_proc else "none",
            private_tmp=True,
            user=plan.user_name,
        )
    return Isolation(
        mode="none",
        network="host",
        filesystem="host",
        pid_namespace=False,
        proc="host",
        private_tmp=False,
        user=f"{plan.user_name} (unisolated: {UNSAFE_SETTING})",
    )


def _decode(data: bytes, total: int, cap_chars: int, keep: str) -> tuple[str, bool]:
    text = data.decode("utf-8", "replace")
    truncated = total > len(data) or len(text) > cap_chars
    if len(text) > cap_chars:
        text = text[:cap_chars] if keep == "head" else text[-cap_chars:]
    return text, truncated


def _files(status: dict[str, Any], limits: SandboxLimits) -> tuple[list[SandboxFile], bool]:
    """The launcher's list of files, validated (it comes from inside the sandbox) and capped again."""
    raw = status.get("files")
    if not isinstance(raw, list):
        return [], False
    files: list[SandboxFile] = []
    for item in raw[: limits.returned_files]:
        try:
            entry = SandboxFile.model_validate(item)
        except ValidationError:
            continue
        if entry.text is not None and len(entry.text) > limits.returned_file_chars:
            entry.text, entry.text_truncated = entry.text[: limits.returned_file_chars], True
        files.append(entry)
    return files, status.get("files_truncated") is True or len(raw) > limits.returned_files


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _classify(
    outcome: Outcome, timeout: int, cpu_limit: int, limits: SandboxLimits
) -> tuple[int | None, ExecError | None, str | None]:
    """(exit code, error, message): a negative exit code is the signal that ended the code."""
    status = outcome.status
    sig = _int(status.get("signal"))
    exit_code = -sig if sig else _int(status.get("exit_code"))
    if outcome.backstop or status.get("timed_out") is True:
        return exit_code, "timeout", f"killed after the {timeout}s wall-clock timeout"
    if status.get("done") is not True:
        return None, "sandbox_error", f"the sandbox failed: {failure_detail(outcome)}"
    reported = _REPORTED_ERRORS.get(str(status.get("error")))
    if reported is not None:
        message = status.get("message")
        return exit_code, reported, (message if isinstance(message, str) and message else reported)[:500]
    if sig:
        used = status.get("cpu_seconds")
        if sig == signal.SIGXCPU or (isinstance(used, int | float) and used >= cpu_limit - 0.5):
            return exit_code, "cpu_limit", "killed: CPU time limit reached"
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        hint = f" (the memory limit is {limits.memory_mb} MB)" if sig in (signal.SIGSEGV, signal.SIGABRT) else ""
        return exit_code, "killed", f"terminated by {name}{hint}"
    return exit_code, None, None


def _result(
    outcome: Outcome, plan: Sandbox | Unisolated, args: ExecPythonArgs, limits: SandboxLimits, started: float
) -> ExecPythonResult:
    stdout, stdout_truncated = _decode(outcome.stdout, outcome.stdout_total, limits.output_chars, "head")
    stderr, stderr_truncated = _decode(outcome.stderr, outcome.stderr_total, limits.output_chars, "tail")
    cpu_limit = max(1, args.timeout_seconds + limits.cpu_seconds_extra)
    exit_code, error, message = _classify(outcome, args.timeout_seconds, cpu_limit, limits)
    files, files_truncated = _files(outcome.status, limits)
    return ExecPythonResult(
        ok=exit_code == 0 and error is None,
        exit_code=exit_code,
        error=error,
        error_message=message,
        stdout=stdout,
        stderr=stderr,
        stdout_truncated=stdout_truncated,
        stderr_truncated=stderr_truncated,
        duration_ms=int((time.monotonic() - started) * 1000),
        files=files,
        files_truncated=files_truncated,
        isolation=_isolation(plan),
    )


def _failed(message: str, started: float) -> ExecPythonResult:
    return ExecPythonResult(
        ok=False,
        exit_code=None,
        error="sandbox_error",
        error_message=message,
        stdout="",
        stderr="",
        duration_ms=int((time.monotonic() - started) * 1000),
    )
